#!/usr/bin/env python3
"""How corpus21g/ and holdout21g/ were split (issue 21, seventh round), kept for the record.

The 45 bodies gathered in the seventh round (2025-2026, GitHub issues and
pull requests, vendor and gateway docs; none of them a body or a source
already in testdata/, checked by source and by body with ids and digits
ignored: about thirty gathered first were found to be and were dropped
before the split; a docs page already used for other rows of its table,
Alibaba Model Studio's error codes, gives rows with codes of their own)
were numbered in collection order (the NNN prefix of each file). A third
was set aside, before any rule or lexicon entry was written from them, by
Python's random.Random(217).sample over the indices; the rest is
corpus21g/. Running this prints the holdout indices; they match the NNN
prefixes in holdout21g/.
"""
import random

N, HELD, SEED = 45, 15, 217
print(sorted(random.Random(SEED).sample(range(N), HELD)))
