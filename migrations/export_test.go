package migrations

// MigrateThese applies the given migrations only: a test brings a schema
// to an earlier version, writes rows as that version would, then migrates
// the rest.
var MigrateThese = migrate
