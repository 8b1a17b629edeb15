--- A group of ranks joined by `ibverbs.fabric.init`.
--
-- Fields: `rank` (0-based), `size`, `launcher`, `host` (this rank's name), `hosts` (every rank's,
-- indexed rank + 1), `root`, `port`, `timeout`, `wireup` ("PMIx 4.2.2" or "TCP"), `wireup_note` (why
-- not PMIx, when `PMIX_RANK` was set or PMIx was asked for), and from PMIx `local_rank`, `local_size`,
-- `node_id`.  A script may set `on_wait`, a function
-- `(who, seconds, ranks)` that rank 0 (and a relay) calls every `wait_every` seconds
-- (`fabric.WAIT_EVERY`, 60; `init{wait_every =}`, `IBV_FABRIC_WAIT_EVERY`) while a collective still
-- waits: `who` names the ranks awaited ("rank 3 (node4)"; a relay as "rank 32 (node33), relay of
-- ranks 32-63"), `ranks` lists them.  Long limits stay: the operator learns whom they wait for.
--
--     local all = assert(f:allgather({qpn = qp.qp_num, gid = gid}))  -- all[r + 1]: rank r's value
--
-- @classmod ibverbs.fabric_group

local fabric_group = {}

--- Waits until every rank has called `barrier`.
-- @tparam[opt] number timeout seconds (default: the group's)
-- @treturn true
-- @return[2] nil, message naming the ranks that did not arrive or left
function fabric_group:barrier(timeout) end

--- Every rank's value on every rank.
-- @param value any serialisable value
-- @tparam[opt] number timeout
-- @treturn table values indexed rank + 1
-- @return[2] nil, message
function fabric_group:allgather(value, timeout) end

--- Every rank's value at `root`.
-- @param value
-- @tparam[opt] integer root (default 0)
-- @tparam[opt] number timeout
-- @treturn table|true at root the values indexed rank + 1; true elsewhere
-- @return[2] nil, message
function fabric_group:gather(value, root, timeout) end

--- `root`'s value on every rank.
-- @param value (only root's counts)
-- @tparam[opt] integer root (default 0)
-- @tparam[opt] number timeout
-- @return root's value
-- @return[2] nil, message
function fabric_group:bcast(value, root, timeout) end

--- Personalised exchange (the QP-info exchange of an all-pairs setup): `list[r + 1]` goes to rank r.
-- @tparam table list
-- @tparam[opt] number timeout
-- @treturn table what each rank sent to this one, indexed by the sender's rank + 1
-- @return[2] nil, message
function fabric_group:alltoall(list, timeout) end

--- root's list, one item per rank: rank r gets `list[r + 1]` (the root passes the list, the others
-- anything); rank 0's cost is one reply per rank.
-- @tparam table list (at the root)
-- @tparam[opt=0] integer root
-- @tparam[opt] number timeout
-- @return this rank's item
-- @return[2] nil, message
function fabric_group:scatter(list, root, timeout) end

--- Point to point through rank 0, the per-round exchange of a schedule: O(size + messages) at rank 0.
-- When every value is a string (and `up` a string or nil) the frames are made by hand, not by dkjson.
-- Past `fabric.TREE_MIN` ranks (or with `group`) it runs over the relay tree (see `ibverbs.fabric`):
-- rank 0 then handles about 2 sqrt(size) frames, the messages themselves are joined unread.
-- @tparam table msgs `{{rank, value}, ...}` this rank sends
-- @param[opt] up a value for rank 0 alone
-- @tparam[opt] number timeout
-- @treturn table `{{from, value}, ...}` sent to this rank
-- @treturn table at rank 0: every rank's `up`, indexed rank + 1
-- @return[2] nil, message
function fabric_group:route(msgs, up, timeout) end

--- The ranks a tolerant group went on without: `{{rank =, host =, why =}, ...}` by rank (empty
-- otherwise); the same on every rank after the next collective.
-- @treturn table
function fabric_group:dead_ranks() end

--- Whether a rank still takes part (always true in a group that is not tolerant).
-- @tparam integer rank
-- @treturn boolean
function fabric_group:alive(rank) end

--- "rank 2 (node3)": a rank with its host when known.
-- @tparam integer rank
-- @treturn string
function fabric_group:name(rank) end

--- How the rendezvous was guarded, and the strangers dropped: on rank 0, those of the
-- rendezvous and of every relay; on a relay, its own.
--     local what, strangers = f:door()
--     --> "authenticated: a secret rank 0 put through PMIx", {"10.0.0.9:40112: a wrong proof (it claims rank 1)"}
-- @treturn string "authenticated: ..." (a key the user gave, a secret through PMIx, munge
-- credentials) or "NOT authenticated: ..." with why
-- @treturn {string,...} one line per stranger ("peer: why"), the first 32, then how many more
function fabric_group:door() end

--- Closes the connections (idempotent; also `__close`).
function fabric_group:close() end

return fabric_group
