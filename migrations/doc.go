// Package migrations holds triage's schema as numbered SQL files embedded in
// the binary, and applies them after River's own migrations.
//
// Files are named NNN_name.sql, numbered from 001 without duplicates; a
// number may be missing while parallel branches each hold the one they were
// given (each version is applied on its own when it is not recorded, so a
// lower number merged later is still applied). Each is applied in its own transaction together with its row in
// triage_migration, so a failed file leaves nothing half-applied. Migrate takes
// a PostgreSQL advisory lock for the whole run, so two processes running
// `triage migrate` at once apply each file exactly once.
package migrations
