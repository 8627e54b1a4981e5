#!/usr/bin/env python3
"""How corpus21i/ and holdout21i/ were split (issue 21, ninth round), kept for the record.

The 60 bodies gathered in the ninth round (2025-2026, GitHub issues and pull
requests, vendor, gateway and router docs; none of them a body or a source
already in testdata/, checked by source and by body with ids and digits
ignored: a few dozen gathered first were found to be and were dropped before
the split; a docs page gives several rows with codes of their own, as in
earlier rounds) were numbered in collection order (the NNN prefix of each
file). A third was set aside, before any rule or lexicon entry was written
from them, by Python's random.Random(2210).sample over the indices; the rest
is corpus21i/. Running this prints the holdout indices; they match the NNN
prefixes in holdout21i/.
"""
import random

N, HELD, SEED = 60, 20, 2210
print(sorted(random.Random(SEED).sample(range(N), HELD)))
