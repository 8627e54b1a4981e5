package classify

// Phase says how far a call got before it failed. The split matters for money:
// a request that was never written cannot have been billed; one that was may have.
type Phase string

const (
	// PhaseResponse: a status line arrived.
	PhaseResponse Phase = "response"
	// PhaseNotSent: the connection failed before the request bytes were written.
	PhaseNotSent Phase = "not_sent"
	// PhaseSentNoResponse: the request was written, then timeout or reset.
	PhaseSentNoResponse Phase = "sent_no_response"
	// PhaseStream: a 2xx stream failed midway; Body holds the stream text received.
	PhaseStream Phase = "stream"
)

// Path says which layers a call crossed: a gateway or router can answer with
// statuses of its own.
type Path string

const (
	PathDirect  Path = "direct"
	PathRouter  Path = "router"
	PathGateway Path = "gateway"
)

// Observation is everything the classifier may look at. JSON field names are a
// contract (docs/design.md, "JSON shapes").
type Observation struct {
	Vendor  string            `json:"vendor"`
	Path    Path              `json:"path"`
	Phase   Phase             `json:"phase"`
	Status  int               `json:"status"`
	Headers map[string]string `json:"headers"`
	Body    string            `json:"body"`
}
