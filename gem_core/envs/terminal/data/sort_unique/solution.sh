sort -u fruits.txt > unique.txt
