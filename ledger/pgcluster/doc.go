// Package pgcluster starts, reuses and stops a private PostgreSQL cluster built
// from the server binaries already on the machine (initdb, pg_ctl), listening
// only on a Unix socket.
//
// It serves two users: the CLI's embedded default (no database configured: a
// cluster in .triage/pg) and the test suite (a throwaway cluster started by
// `make test`). Both need it to work on a fresh Debian machine as root, where
// PostgreSQL refuses to run: the server then runs as an unprivileged OS user
// ("postgres" when the Debian package created it, else "nobody"). When that
// user cannot reach the requested data directory — a checkout under /root or a
// 0700 temporary directory is common — the cluster lives in a shadow directory
// under /var/lib/triage (which tmp cleaners leave alone; /var/tmp when it
// cannot be used, and where earlier versions put it) named after the
// requested path, and a note in the requested directory says where.
// Cluster.Remove deletes the shadow directory too.
package pgcluster
