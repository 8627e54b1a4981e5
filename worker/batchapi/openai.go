package batchapi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/triage-dev/triage/worker/provider"
)

// The OpenAI Batch API: a JSONL file uploaded to /files, a batch created
// from it, its output and error files read back. Shapes: openai-go's
// batch.go and file.go (docs/batch-api.md).

type openAIBatchWire struct {
	ID     string `json:"id"`
	Status string `json:"status"`
	Errors *struct {
		Data []struct {
			Code    string  `json:"code"`
			Line    *int    `json:"line"`
			Message string  `json:"message"`
			Param   *string `json:"param"`
		} `json:"data"`
	} `json:"errors"`
	InputFileID   string  `json:"input_file_id"`
	OutputFileID  *string `json:"output_file_id"`
	ErrorFileID   *string `json:"error_file_id"`
	CreatedAt     int64   `json:"created_at"`
	ExpiresAt     *int64  `json:"expires_at"`
	CompletedAt   *int64  `json:"completed_at"`
	FailedAt      *int64  `json:"failed_at"`
	ExpiredAt     *int64  `json:"expired_at"`
	CancelledAt   *int64  `json:"cancelled_at"`
	RequestCounts struct {
		Total     int `json:"total"`
		Completed int `json:"completed"`
		Failed    int `json:"failed"`
	} `json:"request_counts"`
	// Metadata values are strings on OpenAI; any is taken so that one odd
	// batch on the account cannot make every page unreadable.
	Metadata map[string]any `json:"metadata"`
}

func (w *openAIBatchWire) tag() string {
	s, _ := w.Metadata[MetadataKey].(string)
	return s
}

func unixTime(p *int64) time.Time {
	if p == nil || *p == 0 {
		return time.Time{}
	}
	return time.Unix(*p, 0).UTC()
}

func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

func (w *openAIBatchWire) batch() Batch {
	b := Batch{
		ID: w.ID, VendorStatus: w.Status, InputFileID: w.InputFileID,
		OutputFileID: deref(w.OutputFileID), ErrorFileID: deref(w.ErrorFileID),
		Tag: w.tag(), CreatedAt: unixTime(&w.CreatedAt), ExpiresAt: unixTime(w.ExpiresAt),
	}
	for _, at := range []*int64{w.CompletedAt, w.FailedAt, w.ExpiredAt, w.CancelledAt} {
		if t := unixTime(at); !t.IsZero() {
			b.EndedAt = t
		}
	}
	rc := w.RequestCounts
	b.Counts = Counts{Total: rc.Total, Succeeded: rc.Completed, Errored: rc.Failed}
	rest := max(rc.Total-rc.Completed-rc.Failed, 0)
	switch w.Status {
	case "failed":
		b.Ended, b.Failed = true, true
	case "completed":
		b.Ended = true
	case "expired":
		b.Ended, b.Counts.Expired = true, rest
	case "cancelled":
		b.Ended, b.Counts.Canceled = true, rest
	default:
		b.Counts.Processing = rest
	}
	if w.Errors != nil {
		for _, e := range w.Errors.Data {
			v := ValidationError{Code: e.Code, Message: e.Message, Param: deref(e.Param)}
			if e.Line != nil {
				v.Line = *e.Line
			}
			b.Validation = append(b.Validation, v)
		}
	}
	return b
}

// uploadFilename names the input file after the tag, for a person looking
// at the account's files.
func uploadFilename(tag string) string {
	clean := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' {
			return r
		}
		return '_'
	}, tag)
	if len(clean) > 100 {
		clean = clean[:100]
	}
	return "triage-batch-" + clean + ".jsonl"
}

func (c *Client) openAIUpload(ctx context.Context, lines []Line, tag string) (string, error) {
	data, err := c.encodeLines(lines)
	if err != nil {
		return "", err
	}
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	if err := mw.WriteField("purpose", "batch"); err != nil {
		return "", fmt.Errorf("batchapi: upload: %w", err)
	}
	h := make(textproto.MIMEHeader)
	h.Set("Content-Disposition", fmt.Sprintf(`form-data; name="file"; filename=%q`, uploadFilename(tag)))
	h.Set("Content-Type", "application/jsonl")
	part, err := mw.CreatePart(h)
	if err == nil {
		_, err = part.Write(data)
	}
	if err == nil {
		err = mw.Close()
	}
	if err != nil {
		return "", fmt.Errorf("batchapi: upload: %w", err)
	}
	var f struct {
		ID string `json:"id"`
	}
	if err := c.callJSON(ctx, "upload", http.MethodPost, c.endpoint(nil, "files"), mw.FormDataContentType(), body.Bytes(), &f,
		func() bool { return f.ID != "" }); err != nil {
		return "", err
	}
	return f.ID, nil
}

func (c *Client) openAICreate(ctx context.Context, fileID, tag string) (Batch, error) {
	if err := checkID("file id", fileID); err != nil {
		return Batch{}, err
	}
	req := map[string]any{"input_file_id": fileID, "endpoint": c.openAIEndpoint(), "completion_window": completionWindow}
	if tag != "" {
		req["metadata"] = map[string]string{MetadataKey: tag}
	}
	body, err := json.Marshal(req)
	if err != nil {
		return Batch{}, fmt.Errorf("batchapi: create: %w", err)
	}
	return c.openAIBatchCall(ctx, "create", http.MethodPost, c.endpoint(nil, "batches"), body)
}

func (c *Client) openAIBatchCall(ctx context.Context, op, method, u string, body []byte) (Batch, error) {
	ct := ""
	if body != nil {
		ct = "application/json"
	}
	var w openAIBatchWire
	if err := c.callJSON(ctx, op, method, u, ct, body, &w, func() bool { return w.ID != "" && w.Status != "" }); err != nil {
		return Batch{}, err
	}
	return w.batch(), nil
}

func (c *Client) openAIFind(ctx context.Context, tag string, since time.Time, known Known) (Batch, bool, error) {
	after := ""
	for {
		q := url.Values{"limit": {strconv.Itoa(listPageSize)}}
		if after != "" {
			q.Set("after", after)
		}
		var page struct {
			Data    []openAIBatchWire `json:"data"`
			HasMore bool              `json:"has_more"`
			LastID  *string           `json:"last_id"`
		}
		if err := c.callJSON(ctx, "find", http.MethodGet, c.endpoint(q, "batches"), "", nil, &page, nil); err != nil {
			return Batch{}, false, err
		}
		for i := range page.Data {
			w := &page.Data[i]
			if w.tag() == tag {
				b := w.batch()
				if known == nil {
					return b, true, nil
				}
				// Two batches carry the tag when a process created one
				// after its lease on the row ran out (a stray): the
				// stray is recorded as a row of its own, and is not
				// this row's.
				k, err := known(ctx, b.ID)
				if err != nil {
					return Batch{}, false, err
				}
				if !k {
					return b, true, nil
				}
			}
			if !since.IsZero() && unixTime(&w.CreatedAt).Before(since.Add(-FindClockSkew)) {
				return Batch{}, false, nil // newest first: the rest are older still
			}
		}
		if !page.HasMore || len(page.Data) == 0 {
			return Batch{}, false, nil
		}
		after = page.Data[len(page.Data)-1].ID
	}
}

type openAIResultLine struct {
	CustomID string `json:"custom_id"`
	Response *struct {
		StatusCode int             `json:"status_code"`
		RequestID  string          `json:"request_id"`
		Body       json.RawMessage `json:"body"`
	} `json:"response"`
	Error *struct {
		Code string `json:"code"`
	} `json:"error"`
}

// openAIResults reads the output file, then the error file. A line with a
// response ran, whatever its status; a line with only an error never got an
// HTTP answer (batch_expired: the window closed first) and was not billed.
func (c *Client) openAIResults(ctx context.Context, b Batch, yield func(Result, error) bool) {
	for _, id := range []string{b.OutputFileID, b.ErrorFileID} {
		if id == "" {
			continue
		}
		if err := checkID("file id", id); err != nil {
			yield(Result{}, err)
			return
		}
		ok := c.streamLines(ctx, "results", c.endpoint(nil, "files", id, "content"), func(n int, raw []byte) bool {
			var ln openAIResultLine
			switch err := json.Unmarshal(raw, &ln); {
			case err != nil || ln.CustomID == "":
				return yield(Result{}, fmt.Errorf("%w: file %s line %d is not a result line", ErrMalformedResult, id, n))
			case ln.Response != nil:
				h := map[string]string{}
				if ln.Response.RequestID != "" {
					h["x-request-id"] = ln.Response.RequestID
				}
				res := provider.DecodeResponse(c.format, c.vendor, c.path, ln.Response.StatusCode, h, ln.Response.Body)
				return yield(Result{CustomID: ln.CustomID, Ran: true, Res: res}, nil)
			case ln.Error != nil:
				return yield(Result{CustomID: ln.CustomID, NotRun: openAINotRun(ln.Error.Code)}, nil)
			default:
				return yield(Result{}, fmt.Errorf("%w: file %s line %d has neither response nor error", ErrMalformedResult, id, n))
			}
		}, yield)
		if !ok {
			return
		}
	}
}

func openAINotRun(code string) string {
	switch code {
	case "batch_expired":
		return NotRunExpired
	case "batch_cancelled", "batch_canceled":
		return NotRunCanceled
	case "":
		return "error"
	}
	return code
}
