// Package all lists kfsniff's rules: adding a rule is adding its package
// under detectors/ and one line here.
package all

import (
	"github.com/kfsniff/kfsniff/detectors"
	"github.com/kfsniff/kfsniff/detectors/consumerlag"
	"github.com/kfsniff/kfsniff/detectors/fencing"
	"github.com/kfsniff/kfsniff/detectors/followerlag"
	"github.com/kfsniff/kfsniff/detectors/legacy"
	"github.com/kfsniff/kfsniff/detectors/throttled"
)

// Analyzers returns every rule, in the order they are described.
func Analyzers() []*detectors.Analyzer {
	l := legacy.Analyzers()
	return []*detectors.Analyzer{
		l["internal-error"],
		l["not-leader-loop"],
		l["stalled-fetch"],
		l["liveness-without-replication"],
		l["duplicate-batches"],
		l["replica-divergence"],
		l["leader-election-stall"],
		l["connection-refused"],
		l["advertised-listener-conflict"],
		l["error-storm"],
		throttled.Analyzer,
		l["unanswered-requests"],
		l["slow-responses"],
		consumerlag.Analyzer,
		followerlag.Analyzer,
		fencing.Analyzer,
	}
}
