package batchapi

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"

	"github.com/triage-dev/triage/classify"
	"github.com/triage-dev/triage/worker/provider"
)

// streamLines downloads u and hands fn each non-empty line (1-based n)
// until fn returns false. A failed call or read is yielded as a *CallError.
// It reports whether the whole file was read with fn never saying stop.
func (c *Client) streamLines(ctx context.Context, op, u string, fn func(n int, line []byte) bool, yield func(Result, error) bool) bool {
	resp, x, err := c.send(ctx, op, http.MethodGet, u, "", "", nil)
	if err != nil {
		yield(Result{}, err)
		return false
	}
	defer x.quiet.stop()
	defer resp.Body.Close()
	br := bufio.NewReaderSize(resp.Body, 64<<10)
	for n := 1; ; n++ {
		line, tooLong, err := readLine(br)
		if len(line) > 0 || tooLong {
			if tooLong {
				if !yield(Result{}, fmt.Errorf("%w: line %d is longer than %d bytes", ErrMalformedResult, n, maxResultLineBytes)) {
					return false
				}
			} else if !fn(n, line) {
				return false
			}
		}
		if err == io.EOF {
			return true
		}
		if err != nil {
			x.res.NetworkError = provider.NetworkError(err, c.base.Host)
			yield(Result{}, x.fail(classify.PhaseSentNoResponse))
			return false
		}
	}
}

// readLine reads one line without its line ending; a line over
// maxResultLineBytes is skipped and reported as tooLong.
func readLine(br *bufio.Reader) (line []byte, tooLong bool, err error) {
	for {
		frag, err := br.ReadSlice('\n')
		if !tooLong {
			if len(line)+len(frag) > maxResultLineBytes {
				tooLong, line = true, nil
			} else {
				line = append(line, frag...)
			}
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		return bytes.TrimRight(line, "\r\n"), tooLong, err
	}
}
