printf '#!/bin/sh\necho "Hello, $1!"\n' > greet.sh && chmod +x greet.sh
