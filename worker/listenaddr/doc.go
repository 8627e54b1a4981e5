// Package listenaddr checks the addresses triage's own servers listen on
// (`--metrics-addr`, the UI's `--addr`/`--ui-addr`) before anything is
// started, and opens them: a typo is a usage error named with its flag, not
// a failure after the worker has begun calling, and an address beyond
// loopback is said out loud, because what these servers show is not
// authenticated (metrics) or only by a token (UI).
package listenaddr
