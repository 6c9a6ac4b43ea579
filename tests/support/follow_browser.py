"""A stand-in for a person's browser, for `$BROWSER`: open the authorization URL and follow
its redirects (the test authorization server approves at once) to the agent's loopback
callback. `webbrowser` runs `$BROWSER` with the URL in place of `%s`."""

import sys
import urllib.request

with urllib.request.urlopen(sys.argv[1], timeout=30) as answer:
    answer.read()
