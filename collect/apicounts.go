package collect

import (
	"time"

	"github.com/kfsniff/kfsniff/decode"
	"github.com/kfsniff/kfsniff/flows"
	"github.com/kfsniff/kfsniff/hist"
	"github.com/kfsniff/kfsniff/report"
)

// Tally is where one API's counts go, as CountRequest and CountExchange
// decide them: APICounts for the report (per API key and version) and
// the terminal UI (per key), the Prometheus series of package metrics
// (per API, version and broker). One decision for the three, so that they
// cannot disagree on what a request, a response, an error response or an
// unanswered request is.
type Tally interface {
	// AddRequest counts a request frame; decodeError: its body did not
	// decode although kmsg knows its version.
	AddRequest(decodeError bool)
	// AddUnanswered counts a request known never to have been answered.
	AddUnanswered()
	// AddAnswered counts a response paired with its request, after
	// latency, with its error codes (an error response if there are any).
	AddAnswered(latency time.Duration, codes []flows.ErrorCount, decodeError bool)
}

// Outcome is what CountExchange counted of an exchange.
type Outcome uint8

// What CountExchange counted.
const (
	// NotCounted: no request (an unmatched response, counted per
	// connection), or no response expected or captured.
	NotCounted Outcome = iota
	Unanswered
	Answered       // a response with no error code
	AnsweredErrors // a response with error codes: an error response
)

// CountRequest counts request m into t, its API's.
func CountRequest(t Tally, m *flows.Message) {
	t.AddRequest(m.Err != nil && decode.KnownVersion(m.Key, m.Version))
}

// CountExchange counts x into t, its request's API's, and says what it
// counted.
func CountExchange(t Tally, x *flows.Exchange) Outcome {
	q, r := x.Req, x.Resp
	switch {
	case q == nil:
		return NotCounted
	case x.Unanswered:
		t.AddUnanswered()
		return Unanswered
	case r == nil:
		return NotCounted
	}
	t.AddAnswered(x.Latency(), r.ErrorCodes, r.Err != nil && decode.KnownVersion(q.Key, q.Version))
	if len(r.ErrorCodes) > 0 {
		return AnsweredErrors
	}
	return Answered
}

// APICounts are the counts of one API, a Tally: requests, responses,
// error responses, decode errors, unanswered requests, the error codes
// and the latency.
type APICounts struct {
	Requests, Responses, ErrorResponses, DecodeErrors, Unanswered int64
	// Errors counts the responses' error codes, by code: those Kafka
	// does not define (decode.KnownError) by their number, the first
	// MaxUndefinedErrors of them, and the rest under UndefinedErrors.
	Errors  map[int16]int64
	Latency hist.Histogram

	undefined int // codes Kafka does not define in Errors
}

// UndefinedErrors is the key of Errors summing the codes Kafka does not
// define past the first MaxUndefinedErrors (a response can name
// thousands, each would be an entry).
const UndefinedErrors int16 = -32768

// MaxUndefinedErrors bounds the codes Kafka does not define that Errors
// keeps by their number.
const MaxUndefinedErrors = 16

// AddRequest implements Tally.
func (a *APICounts) AddRequest(decodeError bool) {
	a.Requests++
	if decodeError {
		a.DecodeErrors++
	}
}

// AddUnanswered implements Tally.
func (a *APICounts) AddUnanswered() { a.Unanswered++ }

// AddAnswered implements Tally.
func (a *APICounts) AddAnswered(latency time.Duration, codes []flows.ErrorCount, decodeError bool) {
	if decodeError {
		a.DecodeErrors++
	}
	a.Responses++
	if len(codes) > 0 {
		a.ErrorResponses++
		a.AddErrors(codes)
	}
	a.Latency.Add(latency)
}

// AddErrors counts a response's error codes.
func (a *APICounts) AddErrors(codes []flows.ErrorCount) {
	if a.Errors == nil {
		a.Errors = make(map[int16]int64)
	}
	for _, e := range codes {
		code := e.Code
		if _, seen := a.Errors[code]; !seen && !decode.KnownError(code) {
			if a.undefined >= MaxUndefinedErrors {
				code = UndefinedErrors
			} else {
				a.undefined++
			}
		}
		a.Errors[code] += int64(e.Count)
	}
}

// ErrorName is the name of a key of Errors: Kafka's, or
// report.OtherErrorsName for UndefinedErrors.
func ErrorName(code int16) string {
	if code == UndefinedErrors {
		return report.OtherErrorsName
	}
	return decode.ErrorName(code)
}
