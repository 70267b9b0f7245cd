test -f error_count.txt && [ "$(tr -d ' \n' < error_count.txt)" = "32" ]
