#!/usr/bin/env python3
"""How corpus21h/ and holdout21h/ were split (issue 21, eighth round), kept for the record.

The 61 bodies gathered in the eighth round (2025-2026, GitHub issues and
pull requests, vendor, gateway and router docs; none of them a body or a
source already in testdata/, checked by source and by body with ids and
digits ignored: about forty gathered first were found to be and were dropped
before the split; a docs page already used for other rows of its table,
ZenMux's and Venice's error-code pages, Cloudflare Workers AI's, gives rows
with codes of their own) were numbered in collection order (the NNN prefix
of each file). A third was set aside, before any rule or lexicon entry was
written from them, by Python's random.Random(218).sample over the indices;
the rest is corpus21h/. Running this prints the holdout indices; they match
the NNN prefixes in holdout21h/.
"""
import random

N, HELD, SEED = 61, 20, 218
print(sorted(random.Random(SEED).sample(range(N), HELD)))
