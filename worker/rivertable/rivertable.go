package rivertable

import "github.com/jackc/pgx/v5"

// Job returns River's job table in schema, quoted for SQL. With schema ""
// the name is left unqualified and found through the connection's
// search_path, as River itself does.
func Job(schema string) string { return name(schema, "river_job") }

func name(schema, table string) string {
	if schema == "" {
		return table
	}
	return pgx.Identifier{schema, table}.Sanitize()
}

// Queue returns River's queue table in schema, as Job does.
func Queue(schema string) string { return name(schema, "river_queue") }
