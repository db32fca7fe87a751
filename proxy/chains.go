package proxy

// stageName names a stage of the front door's chains. New builds every
// stage once into a stageSet and each chain from a list of names, so that
// adding a stage to one chain cannot shift the stages of another, as
// slicing a shared list by position would.
type stageName string

// The stages of the chains. The first stages differ per route: a dialect
// (from messages, from responses) translates its request into a chat
// request, read then as /v1's is; the Azure framing is checked before the
// body is read; the count reads a Messages count request. The rest are
// shared.
const (
	stJournal         stageName = "journal"
	stIdentify        stageName = "identify"
	stReadChat        stageName = "read chat"
	stReadEmbeddings  stageName = "read embeddings"
	stFromMessages    stageName = "from messages"
	stFromResponses   stageName = "from responses"
	stReadCount       stageName = "read count"
	stAzureChat       stageName = "azure chat"
	stAzureEmbeddings stageName = "azure embeddings"
	stModel           stageName = "model"
	stLimits          stageName = "limits"
	stRate            stageName = "rate"
	stPolicy          stageName = "policy"
	stRedact          stageName = "redact"
	stInject          stageName = "inject"
)

// stageSet is every stage by name; a nil stage is one the configuration
// turns off (no policies, request redaction off), left out of every chain.
type stageSet map[stageName]Stage

// chain is the named stages, in that order, without those turned off. A
// name with no entry at all is a wiring mistake, not configuration: it
// panics, so that every test that builds a Gateway finds it.
func (s stageSet) chain(names ...stageName) []Stage {
	out := make([]Stage, 0, len(names))
	for _, n := range names {
		st, ok := s[n]
		if !ok {
			panic("proxy: no stage named " + string(n))
		}
		if st != nil {
			out = append(out, st)
		}
	}
	return out
}
