-- wrk script: one vote per request, as POST /v1/polls/{poll}/votes.
-- Every request is a new vote (its own idempotency key); one in ten is a
-- change of mind of a voter from a few requests before. Threads number
-- their voters apart. The poll is the URL's path: wrk -s vote.lua
-- http://127.0.0.1:18081/v1/polls/lean/votes
local threads = 0
function setup(thread)
  thread:set("id", threads)
  threads = threads + 1
end

local n = 0
local run = ""
local options = { "red", "green", "blue", "gold" }
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"

-- Each run (and thread) names its voters and keys apart, so a second run
-- against the same poll sends new votes, not retries.
function init(args)
  math.randomseed(os.time() * 1000 + id)
  run = string.format("%d%06d", os.time(), math.random(0, 999999))
end

function request()
  n = n + 1
  local voter = n
  if n % 10 == 0 then
    voter = n - 5 -- a change of mind
  end
  local body = string.format('{"option":"%s","voter":"t%d-%s-v%d","idem":"t%d-%s-k%d"}', options[n % 4 + 1], id, run, voter, id, run, n)
  return wrk.format(nil, nil, nil, body)
end
