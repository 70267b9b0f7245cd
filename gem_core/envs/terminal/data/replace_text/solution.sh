sed -i 's/^debug=true$/debug=false/' app.ini
