test -f north_total.txt && [ "$(tr -d ' \n' < north_total.txt)" = "2379" ]
