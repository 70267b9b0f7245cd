test -f active_emails.txt && [ "$(cat active_emails.txt)" = "$(printf 'ada@example.org\ncy@example.net\ndi@example.com')" ]
