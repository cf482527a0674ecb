package nomadtest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// HTTPError is a reply of the agent's HTTP API with a status other than
// 2xx.
type HTTPError struct {
	Method, Path string
	Status       int
	Body         string // Nomad's message
}

func (e *HTTPError) Error() string {
	return fmt.Sprintf("nomad %s %s: %d %s: %s", e.Method, e.Path, e.Status, http.StatusText(e.Status), e.Body)
}

// Call sends a request to the agent's HTTP API with the agent's Token; see
// CallAs.
func (a *Agent) Call(ctx context.Context, method, path string, in, out any) error {
	return a.CallAs(ctx, a.Token, method, path, in, out)
}

// CallAs sends a request to the agent's HTTP API with the given ACL token
// (none if empty). path includes the query, e.g. "/v1/jobs?prefix=x". A
// non-nil in is sent as JSON; a 2xx reply is decoded into out unless out is
// nil. Any other status is an *HTTPError.
func (a *Agent) CallAs(ctx context.Context, token, method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		data, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("nomad %s %s: %w", method, path, err)
		}
		body = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(ctx, method, a.Addr+path, body)
	if err != nil {
		return fmt.Errorf("nomad %s %s: %w", method, path, err)
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("X-Nomad-Token", token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("nomad %s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("nomad %s %s: reading the reply: %w", method, path, err)
	}
	if resp.StatusCode/100 != 2 {
		return &HTTPError{Method: method, Path: path, Status: resp.StatusCode, Body: strings.TrimSpace(string(data))}
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			return fmt.Errorf("nomad %s %s: decoding the reply: %w", method, path, err)
		}
	}
	return nil
}
