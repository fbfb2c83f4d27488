// Package all lists kfsniff's rules: adding a rule is adding its package
// under detectors/ and one line here.
package all

import (
	"github.com/kfsniff/kfsniff/detectors"
	"github.com/kfsniff/kfsniff/detectors/advertisedlistenerconflict"
	"github.com/kfsniff/kfsniff/detectors/brokerfencedwhilealive"
	"github.com/kfsniff/kfsniff/detectors/connectionrefused"
	"github.com/kfsniff/kfsniff/detectors/consumerfallingbehind"
	"github.com/kfsniff/kfsniff/detectors/duplicatebatches"
	"github.com/kfsniff/kfsniff/detectors/errorstorm"
	"github.com/kfsniff/kfsniff/detectors/fetchsessionchurn"
	"github.com/kfsniff/kfsniff/detectors/followeroutofsync"
	"github.com/kfsniff/kfsniff/detectors/internalerror"
	"github.com/kfsniff/kfsniff/detectors/kafka40removedversions"
	"github.com/kfsniff/kfsniff/detectors/leaderelectionstall"
	"github.com/kfsniff/kfsniff/detectors/livenesswithoutreplication"
	"github.com/kfsniff/kfsniff/detectors/memberevicted"
	"github.com/kfsniff/kfsniff/detectors/metadataquorumdown"
	"github.com/kfsniff/kfsniff/detectors/metadatastorm"
	"github.com/kfsniff/kfsniff/detectors/noprogress"
	"github.com/kfsniff/kfsniff/detectors/notenoughreplicas"
	"github.com/kfsniff/kfsniff/detectors/notleaderloop"
	"github.com/kfsniff/kfsniff/detectors/producersequence"
	"github.com/kfsniff/kfsniff/detectors/rebalanceloop"
	"github.com/kfsniff/kfsniff/detectors/reconnectstorm"
	"github.com/kfsniff/kfsniff/detectors/recordsrejected"
	"github.com/kfsniff/kfsniff/detectors/recordsskipped"
	"github.com/kfsniff/kfsniff/detectors/replicadivergence"
	"github.com/kfsniff/kfsniff/detectors/saslfailure"
	"github.com/kfsniff/kfsniff/detectors/slowresponses"
	"github.com/kfsniff/kfsniff/detectors/stalledfetch"
	"github.com/kfsniff/kfsniff/detectors/throttled"
	"github.com/kfsniff/kfsniff/detectors/topicrecreated"
	"github.com/kfsniff/kfsniff/detectors/transactionalfencing"
	"github.com/kfsniff/kfsniff/detectors/unansweredrequests"
)

// Analyzers returns every rule, in the order they are described.
func Analyzers() []*detectors.Analyzer {
	return []*detectors.Analyzer{
		internalerror.Analyzer,
		notleaderloop.Analyzer,
		stalledfetch.Analyzer,
		livenesswithoutreplication.Analyzer,
		metadataquorumdown.Analyzer,
		duplicatebatches.Analyzer,
		replicadivergence.Analyzer,
		leaderelectionstall.Analyzer,
		connectionrefused.Analyzer,
		advertisedlistenerconflict.Analyzer,
		errorstorm.Analyzer,
		throttled.Analyzer,
		unansweredrequests.Analyzer,
		slowresponses.Analyzer,
		rebalanceloop.Analyzer,
		memberevicted.Analyzer,
		metadatastorm.Analyzer,
		reconnectstorm.Analyzer,
		saslfailure.Analyzer,
		kafka40removedversions.Analyzer,
		producersequence.Analyzer,
		recordsrejected.Analyzer,
		recordsskipped.Analyzer,
		transactionalfencing.Analyzer,
		notenoughreplicas.Analyzer,
		topicrecreated.Analyzer,
		fetchsessionchurn.Analyzer,
		noprogress.Analyzer,
		consumerfallingbehind.Analyzer,
		followeroutofsync.Analyzer,
		brokerfencedwhilealive.Analyzer,
	}
}
