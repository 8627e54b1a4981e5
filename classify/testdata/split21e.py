#!/usr/bin/env python3
"""How corpus21e/ and holdout21e/ were split (issue 21, fifth round), kept for the record.

The 51 bodies gathered in the fifth round (2025-2026, GitHub issues and
vendor or gateway docs, none of them a body or a source already in
testdata/: about twenty gathered first were found to be, by source or by
body with ids and digits ignored, and were dropped before the split) were
numbered in collection order (the NNN prefix of each file). A third was set
aside, before any rule or lexicon entry was written from them, by Python's
random.Random(215).sample over the indices; the rest is corpus21e/. Running
this prints the holdout indices; they match the NNN prefixes in holdout21e/.
"""
import random

N, HELD, SEED = 51, 17, 215
print(sorted(random.Random(SEED).sample(range(N), HELD)))
