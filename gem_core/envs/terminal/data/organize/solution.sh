mkdir -p images docs text && mv ./*.png images/ && mv ./*.pdf docs/ && mv ./*.txt text/
