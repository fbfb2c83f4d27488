package collect

import (
	"time"

	"github.com/kfsniff/kfsniff/decode"
	"github.com/kfsniff/kfsniff/flows"
	"github.com/kfsniff/kfsniff/hist"
	"github.com/kfsniff/kfsniff/report"
)

// APICounts are the counts of one API (the report keeps them per API
// key and version, the terminal UI per key): requests, responses,
// error responses, decode errors, unanswered requests, the error codes
// and the latency. The report and the UI count through it, so that they
// agree on what an error response is and on the error codes Kafka does
// not define.
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

// Answered counts a response after latency, with its error codes.
func (a *APICounts) Answered(latency time.Duration, codes []flows.ErrorCount) {
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
