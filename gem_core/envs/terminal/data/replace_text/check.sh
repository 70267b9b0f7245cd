# The expected file reaches cmp on its stdin (a here-document), not under a file name of its own.
cmp -s app.ini - <<'INI'
[server]
host=0.0.0.0
port=8080
debug=false

[worker]
threads=4
debug=false
debug_level=3

[client]
# debug=true is the default for development
timeout=30
INI
