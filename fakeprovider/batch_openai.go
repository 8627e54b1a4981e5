package fakeprovider

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"
)

// The OpenAI Batch API: upload a JSONL file (POST /v1/files, purpose=batch),
// create a batch from it (POST /v1/batches), poll it (GET /v1/batches/{id}),
// download output_file_id and error_file_id (GET /v1/files/{id}/content).
// Shapes follow openai-go's batch.go and file.go and OpenAI's batch guide.

const openAIBatchEndpoint = "/v1/chat/completions"

// openAIResponsesBatchEndpoint: a batch of Responses-API lines
// (responses.go), answered with response objects.
const openAIResponsesBatchEndpoint = "/v1/responses"

// openAIFamily: the batch's lines are OpenAI's, chat completions or
// Responses API.
func openAIFamily(v vendor) bool {
	switch v.(type) {
	case openAI, responsesAPI:
		return true
	}
	return false
}

// openAIBatchExpiredMessage is the error OpenAI writes for a line an expired
// batch never ran (batch guide, "Batch expiration").
const openAIBatchExpiredMessage = "This request could not be executed before the completion window expired."

type openAIFileObject struct {
	ID            string  `json:"id"`
	Object        string  `json:"object"`
	Bytes         int     `json:"bytes"`
	CreatedAt     int64   `json:"created_at"`
	ExpiresAt     *int64  `json:"expires_at"`
	Filename      string  `json:"filename"`
	Purpose       string  `json:"purpose"`
	Status        string  `json:"status"`
	StatusDetails *string `json:"status_details"`
}

func (f *batchFile) object() openAIFileObject {
	o := openAIFileObject{ID: f.id, Object: "file", Bytes: len(f.data), CreatedAt: f.created.Unix(),
		Filename: f.filename, Purpose: f.purpose, Status: "processed"}
	if f.purpose == "batch" || f.purpose == "batch_output" {
		o.ExpiresAt = unixOf(f.created.Add(openAIFileExpiry))
	}
	return o
}

func unixOf(t time.Time) *int64 {
	if t.IsZero() {
		return nil
	}
	u := t.Unix()
	return &u
}

func (s *Server) newFileLocked(filename, purpose string, data []byte, now time.Time) *batchFile {
	s.seq++
	f := &batchFile{id: "file-" + newRnd(s.sc.Seed, "file", strconv.FormatUint(s.seq, 10)).text(22, alnum),
		filename: filename, purpose: purpose, data: data, created: now}
	s.batch.files[f.id] = f
	return f
}

// filePurposes are the purposes the Files API takes on upload.
var filePurposes = map[string]bool{"assistants": true, "batch": true, "fine-tune": true, "vision": true, "user_data": true, "evals": true}

func (s *Server) serveFileUpload(w http.ResponseWriter, r *http.Request) {
	v := openAI{}
	s.mu.Lock()
	e, rej := s.batchRequestLocked(v, r)
	s.mu.Unlock()
	if rej != nil {
		writeReply(w, rej)
		return
	}
	filename, purpose, data, err := readUpload(w, r)
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		writeReply(w, v.errReply(e, http.StatusRequestEntityTooLarge, fmt.Sprintf("File is too large: a batch input file can be at most %d bytes.", OpenAIBatchMaxFileBytes), "invalid_request_error", strp("file"), nil))
		return
	case err != nil:
		writeReply(w, v.errReply(e, http.StatusBadRequest, "Could not parse multipart form: "+err.Error(), "invalid_request_error", nil, nil))
		return
	case purpose == "":
		writeReply(w, v.errReply(e, http.StatusBadRequest, "Missing required parameter: 'purpose'.", "invalid_request_error", strp("purpose"), strp("missing_required_parameter")))
		return
	case !filePurposes[purpose]:
		writeReply(w, v.errReply(e, http.StatusBadRequest, fmt.Sprintf("Invalid value for 'purpose': '%s'.", purpose), "invalid_request_error", strp("purpose"), strp("invalid_value")))
		return
	case data == nil:
		writeReply(w, v.errReply(e, http.StatusBadRequest, "Missing required parameter: 'file'.", "invalid_request_error", strp("file"), strp("missing_required_parameter")))
		return
	}
	s.mu.Lock()
	f := s.newFileLocked(filename, purpose, data, e.now)
	s.stats.Batches.FilesUploaded++
	o := f.object()
	s.broadcastLocked()
	s.mu.Unlock()
	writeReplyJSON(w, v, e, http.StatusOK, marshal(o, "  "))
}

// readUpload reads the multipart form the SDKs send: a purpose field and a
// file part. data is nil when there was no file part.
func readUpload(w http.ResponseWriter, r *http.Request) (filename, purpose string, data []byte, err error) {
	r.Body = http.MaxBytesReader(w, r.Body, OpenAIBatchMaxFileBytes+1<<20)
	mr, err := r.MultipartReader()
	if err != nil {
		return "", "", nil, err
	}
	for {
		p, err := mr.NextPart()
		if err == io.EOF {
			return filename, purpose, data, nil
		}
		if err != nil {
			return "", "", nil, err
		}
		b, err := io.ReadAll(p)
		if err != nil {
			return "", "", nil, err
		}
		switch p.FormName() {
		case "purpose":
			purpose = string(b)
		case "file":
			filename, data = p.FileName(), b
			if data == nil {
				data = []byte{}
			}
		}
	}
}

func (s *Server) fileLocked(w http.ResponseWriter, r *http.Request) (*batchFile, *errInfo, bool) {
	v := openAI{}
	e, rej := s.batchRequestLocked(v, r)
	if rej != nil {
		writeReply(w, rej)
		return nil, nil, false
	}
	id := r.PathValue("id")
	f := s.batch.files[id]
	if f == nil {
		writeReply(w, v.errReply(e, http.StatusNotFound, fmt.Sprintf("No such File object: %s", id), "invalid_request_error", strp("id"), nil))
		return nil, nil, false
	}
	return f, e, true
}

func (s *Server) serveFileGet(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if f, e, ok := s.fileLocked(w, r); ok {
		writeReplyJSON(w, openAI{}, e, http.StatusOK, marshal(f.object(), "  "))
	}
}

func (s *Server) serveFileDelete(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if f, e, ok := s.fileLocked(w, r); ok {
		delete(s.batch.files, f.id)
		writeReplyJSON(w, openAI{}, e, http.StatusOK, marshal(struct {
			ID      string `json:"id"`
			Object  string `json:"object"`
			Deleted bool   `json:"deleted"`
		}{f.id, "file", true}, "  "))
	}
}

func (s *Server) serveFileContent(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	f, e, ok := s.fileLocked(w, r)
	s.mu.Unlock()
	if !ok {
		return
	}
	openAI{}.headers(w.Header(), e)
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Length", strconv.Itoa(len(f.data)))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(f.data) // files are never changed once written, so no lock is needed
}

func (s *Server) serveOpenAIBatchCreate(w http.ResponseWriter, r *http.Request) {
	v := openAI{}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	e, rej := s.batchRequestLocked(v, r)
	if rej != nil {
		writeReply(w, rej)
		return
	}
	var req struct {
		InputFileID      string          `json:"input_file_id"`
		Endpoint         string          `json:"endpoint"`
		CompletionWindow string          `json:"completion_window"`
		Metadata         json.RawMessage `json:"metadata"`
	}
	bad := func(msg, param, code string) {
		writeReply(w, v.errReply(e, http.StatusBadRequest, msg, "invalid_request_error", strp(param), strp(code)))
	}
	if err := json.Unmarshal(body, &req); err != nil {
		writeReply(w, v.errReply(e, http.StatusBadRequest, "We could not parse the JSON body of your request.", "invalid_request_error", nil, nil))
		return
	}
	f := s.batch.files[req.InputFileID]
	switch {
	case req.InputFileID == "":
		bad("Missing required parameter: 'input_file_id'.", "input_file_id", "missing_required_parameter")
		return
	case req.Endpoint == "":
		bad("Missing required parameter: 'endpoint'.", "endpoint", "missing_required_parameter")
		return
	case req.Endpoint != openAIBatchEndpoint && req.Endpoint != openAIResponsesBatchEndpoint:
		// The API takes more endpoints; the fake runs chat completions and
		// the Responses API only.
		bad(fmt.Sprintf("Invalid value for 'endpoint': '%s'. This fake supports '%s' and '%s'.", req.Endpoint, openAIBatchEndpoint, openAIResponsesBatchEndpoint), "endpoint", "invalid_value")
		return
	case req.CompletionWindow != "24h":
		bad(fmt.Sprintf("Invalid value for 'completion_window': '%s'. Supported values are: '24h'.", req.CompletionWindow), "completion_window", "invalid_value")
		return
	case f == nil:
		bad(fmt.Sprintf("Invalid 'input_file_id': '%s'. No such file.", req.InputFileID), "input_file_id", "invalid_value")
		return
	case f.purpose != "batch":
		bad(fmt.Sprintf("Invalid 'input_file_id': '%s'. The file must be uploaded with purpose 'batch'.", req.InputFileID), "input_file_id", "invalid_value")
		return
	case s.balance != nil && *s.balance <= 0:
		s.arriveLocked(true)
		s.stats.RequestsWhileExhausted++
		writeReply(w, v.fail(ActionExhausted, Step{}, e))
		return
	}
	s.arriveLocked(true)
	if len(req.Metadata) == 0 {
		req.Metadata = json.RawMessage("null")
	}
	var lines vendor = v
	if req.Endpoint == openAIResponsesBatchEndpoint {
		lines = responsesAPI{}
	}
	b := &batchJob{
		vendor: lines, id: "batch_" + newRnd(s.sc.Seed, "batch", strconv.FormatUint(s.seq, 10)).text(32, hexdig),
		cfg: s.sc.Batch, price: s.sc.Batch.price(s.sc.Price),
		endpoint: req.Endpoint, inputFileID: f.id, metadata: req.Metadata,
		status: stValidating, created: e.now,
	}
	b.input = f.data
	s.batch.jobs[b.id] = b
	s.batch.all = append(s.batch.all, b)
	s.stats.Batches.Created++
	s.sc.Logger.Debug("batch created", "vendor", v.name(), "batch_id", b.id, "input_bytes", len(b.input))
	out := s.openAIBatchObject(b)
	s.advanceLocked(b, e.now) // a zero ValidateFor validates at once, as a poll would see
	s.broadcastLocked()
	writeReplyJSON(w, v, e, http.StatusOK, out)
}

// validateOpenAIBatchLocked checks the input file as OpenAI does while a batch
// is "validating"; any problem fails the whole batch with errors.data.
func (s *Server) validateOpenAIBatchLocked(b *batchJob, at time.Time) {
	data := b.input
	b.input = nil
	limit := b.cfg.MaxRequests
	if limit == 0 {
		limit = OpenAIBatchMaxRequests
	}
	var errs []BatchError
	seen := map[string]bool{}
	var lines []batchLine
	rows := bytes.Split(data, []byte("\n"))
	if len(rows) > 0 && len(bytes.TrimSpace(rows[len(rows)-1])) == 0 {
		rows = rows[:len(rows)-1]
	}
	for i, row := range rows {
		n := i + 1
		var ln struct {
			CustomID *string         `json:"custom_id"`
			Method   string          `json:"method"`
			URL      string          `json:"url"`
			Body     json.RawMessage `json:"body"`
		}
		if err := json.Unmarshal(row, &ln); err != nil || !bytes.HasPrefix(bytes.TrimSpace(row), []byte("{")) {
			errs = append(errs, BatchError{Code: "invalid_json_line", Line: n, Message: "This line is not parseable as valid JSON."})
			continue
		}
		var model struct {
			Model string `json:"model"`
		}
		_ = json.Unmarshal(ln.Body, &model)
		switch {
		case ln.CustomID == nil || *ln.CustomID == "":
			errs = append(errs, BatchError{Code: "missing_required_parameter", Line: n, Param: "custom_id", Message: "Missing required parameter: 'custom_id'."})
		case ln.Method == "":
			errs = append(errs, BatchError{Code: "missing_required_parameter", Line: n, Param: "method", Message: "Missing required parameter: 'method'."})
		case ln.Method != http.MethodPost:
			errs = append(errs, BatchError{Code: "invalid_value", Line: n, Param: "method", Message: fmt.Sprintf("Invalid value for 'method': '%s'. Supported values are: 'POST'.", ln.Method)})
		case ln.URL != b.endpoint:
			errs = append(errs, BatchError{Code: "url_mismatch", Line: n, Param: "url", Message: fmt.Sprintf("The URL provided for this request does not match the batch endpoint (%s).", b.endpoint)})
		case len(ln.Body) == 0 || bytes.Equal(ln.Body, []byte("null")):
			errs = append(errs, BatchError{Code: "missing_required_parameter", Line: n, Param: "body", Message: "Missing required parameter: 'body'."})
		case seen[*ln.CustomID]:
			errs = append(errs, BatchError{Code: "duplicate_custom_id", Line: n, Param: "custom_id", Message: fmt.Sprintf("The custom_id '%s' is used by more than one request in this file.", *ln.CustomID)})
		case b.model != "" && model.Model != b.model:
			errs = append(errs, BatchError{Code: "model_mismatch", Line: n, Param: "body.model", Message: fmt.Sprintf("All requests in a batch must use the same model (%s).", b.model)})
		default:
			seen[*ln.CustomID] = true
			if b.model == "" {
				b.model = model.Model
			}
			lines = append(lines, batchLine{customID: *ln.CustomID, body: ln.Body})
		}
	}
	switch {
	case len(rows) == 0:
		errs = append(errs, BatchError{Code: "empty_file", Message: "The input file is empty."})
	case len(rows) > limit:
		errs = append(errs, BatchError{Code: "too_many_tasks", Message: fmt.Sprintf("The input file has %d requests; a batch can have at most %d.", len(rows), limit)})
	}
	if b.cfg.failsValidation(data) {
		errs = append(errs, *b.cfg.FailValidation)
	}
	if len(errs) > 0 {
		b.status, b.failedAt, b.errors, b.endedAt = stFailed, at, errs, at
		s.stats.Batches.FailedValidation++
		s.sc.Logger.Debug("batch failed validation", "vendor", "openai", "batch_id", b.id, "errors", len(errs), "first_code", errs[0].Code)
		return
	}
	b.lines, b.order = lines, shuffle(s.sc.Seed, b.id, len(lines))
	b.status, b.inProgressAt = stInProgress, at
	s.stats.Batches.Lines += len(lines)
}

type openAIBatchLineError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

type openAIBatchResponse struct {
	StatusCode int             `json:"status_code"`
	RequestID  string          `json:"request_id"`
	Body       json.RawMessage `json:"body"`
}

type openAIBatchOutputLine struct {
	ID       string                `json:"id"`
	CustomID string                `json:"custom_id"`
	Response *openAIBatchResponse  `json:"response"`
	Error    *openAIBatchLineError `json:"error"`
}

// writeOpenAIResultFilesLocked writes the output file (one line per success)
// and the error file (failed lines with the vendor's status and body, then
// expired lines), each in the order the lines ran. A file with no lines is not
// written: its id stays null. Lines a cancelled batch never ran appear in
// neither; the caller must treat missing lines as not run.
func (s *Server) writeOpenAIResultFilesLocked(b *batchJob, at time.Time) {
	var out, errf bytes.Buffer
	line := func(i int) openAIBatchOutputLine {
		ln := &b.lines[i]
		return openAIBatchOutputLine{ID: "batch_req_" + newRnd(s.sc.Seed, "batch-req", b.id, strconv.Itoa(i)).text(32, hexdig), CustomID: ln.customID}
	}
	for _, i := range b.order {
		ln := &b.lines[i]
		o := line(i)
		switch ln.state {
		case lineSucceeded, lineErrored:
			o.Response = &openAIBatchResponse{StatusCode: ln.status, RequestID: ln.reqID, Body: ln.resp}
		case lineExpired:
			o.Error = &openAIBatchLineError{Code: "batch_expired", Message: openAIBatchExpiredMessage}
		default:
			continue
		}
		dst := &errf
		if ln.state == lineSucceeded {
			dst = &out
		}
		dst.Write(marshal(o, ""))
		dst.WriteByte('\n')
	}
	if out.Len() > 0 {
		b.outputFileID = s.newFileLocked("batch_"+b.id+"_output.jsonl", "batch_output", out.Bytes(), at).id
	}
	if errf.Len() > 0 {
		b.errorFileID = s.newFileLocked("batch_"+b.id+"_error.jsonl", "batch_output", errf.Bytes(), at).id
	}
}

type openAIBatchErrorWire struct {
	Code    string  `json:"code"`
	Line    *int    `json:"line"`
	Message string  `json:"message"`
	Param   *string `json:"param"`
}

type openAIBatchWire struct {
	ID       string `json:"id"`
	Object   string `json:"object"`
	Endpoint string `json:"endpoint"`
	Model    string `json:"model,omitempty"`
	Errors   *struct {
		Object string                 `json:"object"`
		Data   []openAIBatchErrorWire `json:"data"`
	} `json:"errors"`
	InputFileID      string  `json:"input_file_id"`
	CompletionWindow string  `json:"completion_window"`
	Status           string  `json:"status"`
	OutputFileID     *string `json:"output_file_id"`
	ErrorFileID      *string `json:"error_file_id"`
	CreatedAt        int64   `json:"created_at"`
	InProgressAt     *int64  `json:"in_progress_at"`
	ExpiresAt        *int64  `json:"expires_at"`
	FinalizingAt     *int64  `json:"finalizing_at"`
	CompletedAt      *int64  `json:"completed_at"`
	FailedAt         *int64  `json:"failed_at"`
	ExpiredAt        *int64  `json:"expired_at"`
	CancellingAt     *int64  `json:"cancelling_at"`
	CancelledAt      *int64  `json:"cancelled_at"`
	RequestCounts    struct {
		Total     int `json:"total"`
		Completed int `json:"completed"`
		Failed    int `json:"failed"`
	} `json:"request_counts"`
	Usage struct {
		InputTokens        int `json:"input_tokens"`
		InputTokensDetails struct {
			CachedTokens int `json:"cached_tokens"`
		} `json:"input_tokens_details"`
		OutputTokens        int `json:"output_tokens"`
		OutputTokensDetails struct {
			ReasoningTokens int `json:"reasoning_tokens"`
		} `json:"output_tokens_details"`
		TotalTokens int `json:"total_tokens"`
	} `json:"usage"`
	Metadata json.RawMessage `json:"metadata"`
}

func optString(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func (s *Server) openAIBatchObject(b *batchJob) []byte {
	o := openAIBatchWire{
		ID: b.id, Object: "batch", Endpoint: b.endpoint, Model: b.model, InputFileID: b.inputFileID,
		CompletionWindow: "24h", Status: b.status,
		OutputFileID: optString(b.outputFileID), ErrorFileID: optString(b.errorFileID),
		CreatedAt: b.created.Unix(), InProgressAt: unixOf(b.inProgressAt), ExpiresAt: unixOf(b.expiresAt()),
		FailedAt: unixOf(b.failedAt), ExpiredAt: unixOf(b.expiredAt),
		CancellingAt: unixOf(b.cancellingAt), CancelledAt: unixOf(b.cancelledAt), Metadata: b.metadata,
	}
	if b.status == stFinalizing || b.status == stCompleted {
		o.FinalizingAt = unixOf(b.finalizingAt)
	}
	if b.status == stCompleted {
		o.CompletedAt = unixOf(b.endedAt)
	}
	if len(b.errors) > 0 {
		o.Errors = &struct {
			Object string                 `json:"object"`
			Data   []openAIBatchErrorWire `json:"data"`
		}{Object: "list"}
		for _, be := range b.errors {
			ew := openAIBatchErrorWire{Code: be.Code, Message: be.Message, Param: optString(be.Param)}
			if be.Line > 0 {
				l := be.Line
				ew.Line = &l
			}
			o.Errors.Data = append(o.Errors.Data, ew)
		}
	}
	if b.status != stValidating && b.status != stFailed {
		o.RequestCounts.Total = len(b.lines)
		// An expired line counts in neither completed nor failed, as OpenAI
		// reports it; it is in the error file all the same.
		o.RequestCounts.Completed, o.RequestCounts.Failed = b.succeeded, b.errored
	}
	o.Usage.InputTokens, o.Usage.OutputTokens, o.Usage.TotalTokens = b.inTok, b.outTok, b.inTok+b.outTok
	return marshal(o, "  ")
}

func (s *Server) openAIBatchLocked(w http.ResponseWriter, r *http.Request) (*batchJob, *errInfo, bool) {
	v := openAI{}
	e, rej := s.batchRequestLocked(v, r)
	if rej != nil {
		writeReply(w, rej)
		return nil, nil, false
	}
	id := r.PathValue("id")
	b := s.batch.jobs[id]
	if bv := b.vendorOrNil(); bv == nil || !openAIFamily(bv) {
		writeReply(w, v.errReply(e, http.StatusNotFound, fmt.Sprintf("No batch found with id '%s'.", id), "invalid_request_error", nil, nil))
		return nil, nil, false
	}
	return b, e, true
}

func (b *batchJob) vendorOrNil() vendor {
	if b == nil {
		return nil
	}
	return b.vendor
}

func (s *Server) serveOpenAIBatchGet(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	defer s.broadcastLocked()
	if b, e, ok := s.openAIBatchLocked(w, r); ok {
		writeReplyJSON(w, openAI{}, e, http.StatusOK, s.openAIBatchObject(b))
	}
}

func (s *Server) serveOpenAIBatchCancel(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	defer s.broadcastLocked()
	b, e, ok := s.openAIBatchLocked(w, r)
	if !ok {
		return
	}
	switch b.status {
	case stValidating, stInProgress, stFinalizing:
		s.cancelLocked(b, e.now)
	case stCancelling:
	default:
		writeReply(w, openAI{}.errReply(e, http.StatusBadRequest, fmt.Sprintf("Cannot cancel a batch with status '%s'.", b.status), "invalid_request_error", nil, nil))
		return
	}
	// The answer says "cancelling" even when CancelFor is 0, as the API does;
	// the next poll sees it cancelled.
	writeReplyJSON(w, openAI{}, e, http.StatusOK, s.openAIBatchObject(b))
}

func (s *Server) serveOpenAIBatchList(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v := openAI{}
	e, rej := s.batchRequestLocked(v, r)
	if rej != nil {
		writeReply(w, rej)
		return
	}
	page, more := s.batch.listLocked(v, r.URL.Query().Get("after"), "", listLimit(r, 100))
	data := make([]json.RawMessage, len(page))
	for i, b := range page {
		data[i] = s.openAIBatchObject(b)
	}
	o := struct {
		Object  string            `json:"object"`
		Data    []json.RawMessage `json:"data"`
		FirstID *string           `json:"first_id"`
		LastID  *string           `json:"last_id"`
		HasMore bool              `json:"has_more"`
	}{Object: "list", Data: data, HasMore: more}
	if len(page) > 0 {
		o.FirstID, o.LastID = &page[0].id, &page[len(page)-1].id
	}
	writeReplyJSON(w, v, e, http.StatusOK, marshal(o, "  "))
}
