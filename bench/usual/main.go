package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"tally/api"
	"tally/ingest"
)

// voteScript is one vote, the way a single-server design does it: a token
// bucket per client IP (refilled by elapsed time), then the ranking, the
// totals and a per-second bucket.
var voteScript = redis.NewScript(`
local bucket = KEYS[1]
local now = tonumber(ARGV[1])
local rate, burst = tonumber(ARGV[2]), tonumber(ARGV[3])
local b = redis.call('HMGET', bucket, 'tokens', 'ts')
local tokens = tonumber(b[1]) or burst
local ts = tonumber(b[2]) or now
tokens = math.min(burst, tokens + (now - ts) * rate / 1000)
if tokens < 1 then return -1 end
redis.call('HSET', bucket, 'tokens', tokens - 1, 'ts', now)
redis.call('PEXPIRE', bucket, 60000)
redis.call('ZINCRBY', KEYS[2], 1, ARGV[4])
redis.call('INCRBY', KEYS[3], 1)
redis.call('INCRBY', KEYS[4], 1)
redis.call('EXPIRE', KEYS[4], 120)
return 1
`)

func main() {
	addr := flag.String("addr", "127.0.0.1:18091", "listen address")
	store := flag.String("store", "redis", "redis, postgres, or none (the bare-HTTP ceiling: decode and ack only)")
	redisAddr := flag.String("redis", "127.0.0.1:6379", "Redis address")
	pgURL := flag.String("postgres", "postgres://tally@127.0.0.1:5432/tally", "PostgreSQL URL")
	maxFrame := flag.Int("max-message", 64<<10, "the largest WebSocket message read on GET /v1/polls/{poll}/live, in bytes")
	maxSockets := flag.Int64("max-sockets", 20_000, "the most WebSockets open at once")
	flag.Parse()
	ctx := context.Background()
	var vote func(ctx context.Context, poll, option, ip string) error
	switch *store {
	case "none":
		vote = func(context.Context, string, string, string) error { return nil }
	case "redis":
		rdb := redis.NewClient(&redis.Options{Addr: *redisAddr, PoolSize: 128})
		vote = func(ctx context.Context, poll, option, ip string) error {
			now := time.Now()
			keys := []string{"bucket:" + ip, "rank:" + poll, "total:" + poll, "sec:" + poll + ":" + strconv.FormatInt(now.Unix(), 10)}
			n, err := voteScript.Run(ctx, rdb, keys, now.UnixMilli(), 1e9, 1e9, option).Int()
			if err == nil && n < 0 {
				return api.Errorf(http.StatusTooManyRequests, api.CodeRateLimited, "rate limited")
			}
			return err
		}
	case "postgres":
		pool, err := pgxpool.New(ctx, *pgURL+"?pool_max_conns=64")
		if err != nil {
			log.Fatal(err)
		}
		if _, err := pool.Exec(ctx, `CREATE TABLE IF NOT EXISTS options (poll text, option text, votes bigint, PRIMARY KEY (poll, option))`); err != nil {
			log.Fatal(err)
		}
		for _, o := range []string{"red", "green", "blue", "gold"} {
			pool.Exec(ctx, `INSERT INTO options VALUES ('demo', $1, 0) ON CONFLICT DO NOTHING`, o)
		}
		vote = func(ctx context.Context, poll, option, ip string) error {
			tag, err := pool.Exec(ctx, `UPDATE options SET votes = votes + 1 WHERE poll = $1 AND option = $2`, poll, option)
			if err == nil && tag.RowsAffected() != 1 {
				return api.Errorf(http.StatusUnprocessableEntity, api.CodeInvalidOption, "no option %q", option)
			}
			return err
		}
	default:
		log.Fatalf("unknown --store %q", *store)
	}
	var seq atomic.Uint64
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/polls/{poll}/votes", func(w http.ResponseWriter, r *http.Request) {
		body, err := api.ReadBody(w, r, 16<<10)
		if err != nil {
			api.WriteError(w, r, err)
			return
		}
		votes, err := ingest.DecodeVotes(body)
		if err != nil {
			api.WriteError(w, r, err)
			return
		}
		ip, _, _ := net.SplitHostPort(r.RemoteAddr)
		res := make([]ingest.Result, len(votes))
		for i, v := range votes {
			if err := vote(r.Context(), r.PathValue("poll"), v.Option, ip); err != nil {
				api.WriteError(w, r, fmt.Errorf("vote: %w", err))
				return
			}
			res[i] = ingest.Result{Idem: v.Idem, Status: ingest.StatusAccepted, VoteID: *store + "/" + strconv.FormatUint(seq.Add(1), 10)}
		}
		api.WriteJSON(w, r, http.StatusOK, ingest.VoteResponse{Results: res, ServerTime: time.Now().UnixMilli()})
	})
	socks := &sockets{store: *store, vote: vote, seq: &seq, maxFrame: *maxFrame, max: *maxSockets}
	mux.HandleFunc("GET /v1/polls/{poll}/live", socks.serve)
	srv := &http.Server{Addr: *addr, Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	log.Fatal(srv.ListenAndServe())
}
