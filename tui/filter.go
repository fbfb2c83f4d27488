package tui

import (
	"strconv"
	"strings"

	"github.com/kfsniff/kfsniff/decode"
)

// Filter selects exchanges. Its text is space-separated terms, all of
// which must match; each is a case-insensitive substring:
//
//	Fetch            plain text: the API, client id, topic, error name,
//	                 role, or state (unanswered, unmatched, "no response")
//	api:Metadata     the API name only (api:=Fetch for exactly Fetch)
//	client:raft-     the client id
//	topic:orders     the (first) topic of the request
//	error:NOT_LEADER the error name; "error:" or "errors" alone: any error
//	role:raft        the connection role of the request
//	conn:4           connection #4 (exact)
//	-term            negates a term
type Filter struct {
	text  string
	terms []term
}

type field int

const (
	fieldAny field = iota
	fieldAPI
	fieldAPIExact
	fieldClient
	fieldTopic
	fieldError
	fieldAnyError
	fieldRole
	fieldConn
)

type term struct {
	field field
	value string
	conn  int
	neg   bool
}

// ParseFilter parses a filter's text; the empty text matches everything.
func ParseFilter(s string) Filter {
	f := Filter{text: strings.TrimSpace(s)}
	for _, w := range strings.Fields(s) {
		t := term{}
		if len(w) > 1 && w[0] == '-' {
			t.neg, w = true, w[1:]
		}
		key, val, ok := strings.Cut(w, ":")
		if !ok {
			key, val = "", w
		}
		switch strings.ToLower(key) {
		case "":
			t.field = fieldAny
			if strings.EqualFold(val, "errors") {
				t.field = fieldAnyError
			}
		case "api":
			t.field = fieldAPI
			if v, ok := strings.CutPrefix(val, "="); ok {
				t.field, val = fieldAPIExact, v
			}
		case "client", "id", "clientid", "client-id":
			t.field = fieldClient
		case "topic":
			t.field = fieldTopic
		case "error", "err", "errors":
			t.field = fieldError
			if val == "" || strings.EqualFold(val, "any") {
				t.field = fieldAnyError
			}
		case "role":
			t.field = fieldRole
		case "conn", "connection":
			n, err := strconv.Atoi(strings.TrimPrefix(val, "#"))
			if err != nil {
				t.field, val = fieldAny, w
			} else {
				t.field, t.conn = fieldConn, n
			}
		default:
			// "host:port" and the like: plain text.
			t.field, val = fieldAny, w
		}
		t.value = val
		f.terms = append(f.terms, t)
	}
	return f
}

// String is the filter's text.
func (f Filter) String() string { return f.text }

// Empty reports whether the filter matches everything.
func (f Filter) Empty() bool { return len(f.terms) == 0 }

// Match reports whether x passes every term. It does not allocate.
func (f Filter) Match(x *Exchange) bool {
	for i := range f.terms {
		if f.terms[i].match(x) == f.terms[i].neg {
			return false
		}
	}
	return true
}

func (t *term) match(x *Exchange) bool {
	switch t.field {
	case fieldAPI:
		return containsFold(x.API(), t.value)
	case fieldAPIExact:
		return strings.EqualFold(x.API(), t.value)
	case fieldClient:
		return containsFold(x.ClientID, t.value)
	case fieldTopic:
		return containsFold(x.Topic, t.value)
	case fieldError:
		return x.Errors > 0 && containsFold(decode.ErrorName(x.ErrorCode), t.value)
	case fieldAnyError:
		return x.Errors > 0 || x.DecodeError
	case fieldRole:
		return containsFold(x.Role.String(), t.value)
	case fieldConn:
		return x.Conn == t.conn
	}
	return containsFold(x.API(), t.value) ||
		containsFold(x.ClientID, t.value) ||
		containsFold(x.Topic, t.value) ||
		x.Errors > 0 && containsFold(decode.ErrorName(x.ErrorCode), t.value) ||
		containsFold(x.Role.String(), t.value) ||
		x.State != Answered && containsFold(x.State.String(), t.value)
}

// containsFold is strings.Contains ignoring case, without allocating.
func containsFold(s, sub string) bool {
	if sub == "" {
		return true
	}
	for i := 0; i+len(sub) <= len(s); i++ {
		if strings.EqualFold(s[i:i+len(sub)], sub) {
			return true
		}
	}
	return false
}
