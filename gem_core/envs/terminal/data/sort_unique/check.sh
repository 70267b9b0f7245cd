test -f unique.txt && [ "$(cat unique.txt)" = "$(printf 'apple\nbanana\ncherry\nfig\nkiwi\npear')" ]
