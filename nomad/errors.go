package nomad

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strings"

	"github.com/hashicorp/nomad/api"

	"paxcron/cron/launcher"
)

// CallError is a call to Nomad that failed. A Permanent one wraps
// launcher.ErrRejected: Nomad refused it and repeating it cannot help.
// Any other leaves the outcome unknown (a timeout, a lost reply, a 5xx):
// a dispatch may have happened.
type CallError struct {
	// Op is the call: "dispatch", "lookup", "running", "stop" or
	// "version".
	Op string
	// Subject is what the call was about: the parent job and identity
	// of a dispatch or lookup, the child of running and stop.
	Subject string
	// Status is the HTTP status Nomad answered; 0 when none came back.
	Status int
	// Message is Nomad's message, or the transport's error.
	Message   string
	Permanent bool
	Err       error
}

func (e *CallError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "nomad: %s %s: ", e.Op, e.Subject)
	if e.Permanent {
		b.WriteString("refused: ")
	}
	if e.Status != 0 {
		fmt.Fprintf(&b, "%d %s: ", e.Status, http.StatusText(e.Status))
	}
	b.WriteString(e.Message)
	return b.String()
}

// Unwrap makes errors.Is(err, launcher.ErrRejected) hold for a permanent
// error.
func (e *CallError) Unwrap() []error {
	if e.Permanent {
		return []error{launcher.ErrRejected, e.Err}
	}
	return []error{e.Err}
}

// Permanent reports whether err is a refusal by Nomad (it wraps
// launcher.ErrRejected).
func Permanent(err error) bool { return errors.Is(err, launcher.ErrRejected) }

// permanentMessages are the refusals Nomad sends as a 500 although they
// are no server trouble: Job.Dispatch returns plain errors for a parent
// that is missing, stopped or not parameterized, and for a payload or
// meta the parent does not accept (nomad/job_endpoint.go, Dispatch and
// validateDispatchRequest, 1.11), and the HTTP layer turns every plain
// error into a 500.
var permanentMessages = regexp.MustCompile(strings.Join([]string{
	`parameterized job not found`,
	`missing parameterized job ID`,
	`Specified job ".*" is not a parameterized job`,
	`Specified job ".*" is stopped`,
	`Payload is not provided but required`,
	`Payload provided but forbidden`,
	`Payload exceeds maximum size`,
	`Duplicate key ".*" in passed metadata`,
	`unpermitted metadata keys`,
	`did not provide required meta keys`,
	`dispatch job priority must be between`,
}, "|"))

// classify reads a failed call's error: the HTTP status (0 if none came
// back), Nomad's message, and whether it is permanent.
//
// The rule: no answer (network, timeout, cancel), 408, 429 and any 5xx
// are retryable (a 5xx includes "No cluster leader" and "leadership
// lost", after which a write may still be applied), except the 500s whose
// message is one of permanentMessages; any other 4xx (400, 403 permission
// denied or token not found, 404, 413) is permanent.
func classify(err error) (status int, msg string, permanent bool) {
	var ure api.UnexpectedResponseError
	if !errors.As(err, &ure) || !ure.HasStatusCode() {
		return 0, err.Error(), false
	}
	status, msg = ure.StatusCode(), strings.TrimSpace(ure.Body())
	if msg == "" {
		msg = ure.Error()
	}
	switch {
	case status == http.StatusRequestTimeout || status == http.StatusTooManyRequests:
		return status, msg, false
	case status >= 400 && status < 500:
		return status, msg, true
	case status >= 500:
		return status, msg, permanentMessages.MatchString(msg)
	}
	return status, msg, false // a 1xx or 3xx the client did not follow
}

// callError wraps err, a failed call op about subject, as a *CallError.
func callError(op, subject string, err error) *CallError {
	status, msg, permanent := classify(err)
	return &CallError{Op: op, Subject: subject, Status: status, Message: msg, Permanent: permanent, Err: err}
}

// notFound reports whether err is Nomad's 404.
func notFound(err error) bool {
	var ce *CallError
	if errors.As(err, &ce) {
		return ce.Status == http.StatusNotFound
	}
	status, _, _ := classify(err)
	return status == http.StatusNotFound
}

// deadlineErr is what a call returns when its context ended: the last
// attempt's error (or the context's when none was made).
func deadlineErr(ctx context.Context, last error) error {
	if last == nil {
		return fmt.Errorf("nomad: no attempt before the deadline: %w", context.Cause(ctx))
	}
	return fmt.Errorf("%w (then the deadline passed: %v)", last, context.Cause(ctx))
}
