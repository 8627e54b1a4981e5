package provider

import (
	"context"
	"errors"
	"net/url"
)

// networkError describes a failed round trip for a person: the error below
// net/http's *url.Error (which would repeat the whole URL, query and all)
// and the host it was trying to reach.
func (c *Client) networkError(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) && ue.Err != nil {
		err = ue.Err
	}
	msg := err.Error()
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		msg = "no answer within the key's timeout"
	case errors.Is(err, context.Canceled):
		msg = "the call was cancelled"
	}
	return msg + " (host " + c.baseURL.Host + ")"
}
