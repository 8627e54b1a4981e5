// Package decide is the worker's pure decision: what a run of a job knows
// (its facts) in, a Reaction out. It holds the rules the worker reacts by
// (the checks before a call, the reaction to a verdict after it), and the
// policies they use: the backoff and its jitter, the retry budget, the
// changed retry of an overflow and its cut, the fallback's capability,
// accepting a cut stream's partial text, and the batch line's mapping of
// a synchronous wait to the next provider batch.
//
// It does no I/O and reads no clock: every time it needs (an age, a wait
// left on a pause, how long a look-up has waited) is a fact the worker
// measured. Its only randomness is Jitter. A test (deps_test.go) fails if
// the package's imports ever reach the database driver, River, net/http,
// database/sql or os/exec, or if its code calls time.Now, time.Sleep or
// time.After; the worker package gathers the facts and its apply is the one
// place that acts on a Reaction.
package decide
