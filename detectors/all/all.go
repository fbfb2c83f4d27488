// Package all lists kfsniff's rules: adding a rule is adding its package
// under detectors/ and one line here.
package all

import (
	"github.com/kfsniff/kfsniff/detectors"
	"github.com/kfsniff/kfsniff/detectors/consumerlag"
	"github.com/kfsniff/kfsniff/detectors/divergence"
	"github.com/kfsniff/kfsniff/detectors/dupbatches"
	"github.com/kfsniff/kfsniff/detectors/electionstall"
	"github.com/kfsniff/kfsniff/detectors/errorstorm"
	"github.com/kfsniff/kfsniff/detectors/fencing"
	"github.com/kfsniff/kfsniff/detectors/fetchsession"
	"github.com/kfsniff/kfsniff/detectors/followerlag"
	"github.com/kfsniff/kfsniff/detectors/internalerror"
	"github.com/kfsniff/kfsniff/detectors/kafka40"
	"github.com/kfsniff/kfsniff/detectors/listenerconflict"
	"github.com/kfsniff/kfsniff/detectors/liveness"
	"github.com/kfsniff/kfsniff/detectors/metastorm"
	"github.com/kfsniff/kfsniff/detectors/minisr"
	"github.com/kfsniff/kfsniff/detectors/notleader"
	"github.com/kfsniff/kfsniff/detectors/quorumdown"
	"github.com/kfsniff/kfsniff/detectors/rebalance"
	"github.com/kfsniff/kfsniff/detectors/reconnect"
	"github.com/kfsniff/kfsniff/detectors/recreated"
	"github.com/kfsniff/kfsniff/detectors/refused"
	"github.com/kfsniff/kfsniff/detectors/sasl"
	"github.com/kfsniff/kfsniff/detectors/sequence"
	"github.com/kfsniff/kfsniff/detectors/slowresponses"
	"github.com/kfsniff/kfsniff/detectors/stalledfetch"
	"github.com/kfsniff/kfsniff/detectors/throttled"
	"github.com/kfsniff/kfsniff/detectors/unanswered"
)

// Analyzers returns every rule, in the order they are described.
func Analyzers() []*detectors.Analyzer {
	return []*detectors.Analyzer{
		internalerror.Analyzer,
		notleader.Analyzer,
		stalledfetch.Analyzer,
		liveness.Analyzer,
		quorumdown.Analyzer,
		dupbatches.Analyzer,
		divergence.Analyzer,
		electionstall.Analyzer,
		refused.Analyzer,
		listenerconflict.Analyzer,
		errorstorm.Analyzer,
		throttled.Analyzer,
		unanswered.Analyzer,
		slowresponses.Analyzer,
		rebalance.Analyzer,
		metastorm.Analyzer,
		reconnect.Analyzer,
		sasl.Analyzer,
		kafka40.Analyzer,
		sequence.Analyzer,
		minisr.Analyzer,
		recreated.Analyzer,
		fetchsession.Analyzer,
		consumerlag.Analyzer,
		followerlag.Analyzer,
		fencing.Analyzer,
	}
}
