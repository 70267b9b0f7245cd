test -x greet.sh && [ "$(./greet.sh Ada)" = "Hello, Ada!" ] && [ "$(./greet.sh 'Grace Hopper')" = "Hello, Grace Hopper!" ]
