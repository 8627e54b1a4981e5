#!/usr/bin/env python3
"""How corpus21f/ and holdout21f/ were split (issue 21, sixth round), kept for the record.

The 27 bodies gathered in the sixth round (2025-2026, GitHub issues and
vendor or gateway docs, none of them a body or a source already in
testdata/ except where a source names a vendor's docs page of which
another row is already used; about twenty-five gathered first were found
to be in testdata/, by source or by body with ids and digits ignored, and
were dropped before the split) were numbered in collection order (the NNN
prefix of each file). A third was set aside, before any rule or lexicon
entry was written from them, by Python's random.Random(216).sample over
the indices; the rest is corpus21f/. Running this prints the holdout
indices; they match the NNN prefixes in holdout21f/.

A second batch of 8 bodies (027-034) and a third of 10 (035-044), each
gathered after the previous split was committed and before any rule or
lexicon entry of the round, were split the same way on their own (seeds
2162 and 2163, a third aside), so that each earlier split stays as it was
committed: 15 of the 45 bodies are held aside.
"""
import random

N, HELD, SEED = 27, 9, 216
print(sorted(random.Random(SEED).sample(range(N), HELD)))

N2, HELD2, SEED2 = 8, 3, 2162
print(sorted(random.Random(SEED2).sample(range(N, N + N2), HELD2)))

N3, HELD3, SEED3 = 10, 3, 2163
print(sorted(random.Random(SEED3).sample(range(N + N2, N + N2 + N3), HELD3)))
