package node

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"net/http"

	"tally/api"
)

// PeerHeader carries the cluster credential on node-to-node calls (the
// certifier fetching a replica's ledger): never the admin token, which a
// node may not share with the others and must not send over the network.
const PeerHeader = "Tally-Peer"

// peerTokens derives the node-to-node credential from each gossip key (a
// purpose-bound HMAC, so the key itself never travels): the first is
// sent, all are accepted, so the key rotation of docs/operations.md works
// for this path too. None without a key: a single node has no peers.
func peerTokens(keys [][]byte) []string {
	var out []string
	for _, k := range keys {
		m := hmac.New(sha256.New, k)
		m.Write([]byte("tally peer credential v1"))
		out = append(out, hex.EncodeToString(m.Sum(nil)))
	}
	return out
}

// adminOrPeer lets a request through with the admin token or with a valid
// cluster credential in PeerHeader; else 401.
func (n *Node) adminOrPeer(h http.HandlerFunc) http.Handler {
	admin := api.RequireBearer(n.adminTokens, h)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if got := r.Header.Get(PeerHeader); got != "" {
			for _, t := range n.peerTokens {
				if subtle.ConstantTimeCompare([]byte(got), []byte(t)) == 1 {
					h(w, r)
					return
				}
			}
			api.WriteError(w, r, api.Errorf(http.StatusUnauthorized, api.CodeUnauthorized, "cluster credential not accepted: the nodes must share --gossip-key"))
			return
		}
		admin.ServeHTTP(w, r)
	})
}
