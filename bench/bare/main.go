package main

import (
	"flag"
	"log"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"tally/api"
	"tally/ingest"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:18090", "listen address")
	flag.Parse()
	var seq atomic.Uint64
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/polls/{poll}/votes", func(w http.ResponseWriter, r *http.Request) {
		body, err := api.ReadBody(w, r, 16<<10)
		if err != nil {
			api.WriteError(w, err)
			return
		}
		votes, err := ingest.DecodeVotes(body)
		if err != nil {
			api.WriteError(w, err)
			return
		}
		res := make([]ingest.Result, len(votes))
		for i, v := range votes {
			res[i] = ingest.Result{Idem: v.Idem, Status: ingest.StatusAccepted, VoteID: "bare/" + strconv.FormatUint(seq.Add(1), 10)}
		}
		api.WriteJSON(w, http.StatusOK, ingest.VoteResponse{Results: res, ServerTime: time.Now().UnixMilli()})
	})
	srv := &http.Server{Addr: *addr, Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	log.Fatal(srv.ListenAndServe())
}
