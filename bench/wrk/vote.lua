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
local options = { "red", "green", "blue", "gold" }
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"

function request()
  n = n + 1
  local voter = n
  if n % 10 == 0 then
    voter = n - 5 -- a change of mind
  end
  local body = string.format('{"option":"%s","voter":"t%d-v%d","idem":"t%d-k%d"}', options[n % 4 + 1], id, voter, id, n)
  return wrk.format(nil, nil, nil, body)
end
