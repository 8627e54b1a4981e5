package operator_test

import (
	"encoding/json"

	"github.com/riverqueue/river/rivertype"
)

func unmarshalArgs(j *rivertype.JobRow, v any) error { return json.Unmarshal(j.EncodedArgs, v) }
