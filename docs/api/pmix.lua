--- A PMIx client (`ibverbs.pmix`), made by `ibv.pmix`: the launcher's process-management
-- service (`srun --mpi=pmix`, Open MPI's `mpirun`, `prterun`) on the node's libpmix, opened at
-- run time (neither the module nor `ibvlua` links it).  `ibverbs.fabric` wires up through it.
--
--     local p = assert(ibv.pmix())
--     local size = p:get(nil, "pmix.job.size")
--     assert(p:put("my.addr", addr)); assert(p:commit())
--     assert(p:fence{timeout = 60})                 -- every rank put its address
--     local got, missing = p:get_all("my.addr", {0, 1, 2}, 10)
--
-- Every release from 2.0 on is used through the calls and structs that all of them share (one
-- `pmix_info_t` at a time); 1.x is refused.  The blocking calls run as their non-blocking forms
-- and wait bounded and interruptibly (SIGINT raises "PMIx_Fence: interrupted"): a fence that a
-- rank never joins ends at its time limit in every series.
-- @classmod ibverbs.pmix

local pmix = {}

--- This process in the job.
-- @treturn table `nspace` (the namespace), `rank`, `version` ("4.2.2"), `library`
-- (`PMIx_Get_version()`), `path` (the file opened)
function pmix:info() end

--- A value the job or a rank put (`PMIx_Get_nb`, waited for).  A peer's key is fetched from its
-- server when this one lacks it, waiting until the peer committed it (or the time limit).
-- @tparam ?integer rank 0 to 4294967293, or nil for the job's own values (`PMIX_RANK_WILDCARD`:
-- "pmix.job.size", "pmix.local.size")
-- @tparam string key "pmix.hname", "pmix.lrank", "pmix.nodeid", or a key a rank put (1 to 511
-- bytes)
-- @tparam[opt=60] number timeout seconds
-- @return a boolean, an integer (every integer type) or a string (strings and byte objects)
-- @return[2] nil, message, errno
-- @errno ETIMEDOUT no answer in time; ENOENT not found; EINVAL a value of a type not read
-- (named); ECONNREFUSED, EIO other PMIx errors (named with PMIx's status)
-- @raise a rank out of range, a key empty, too long or with a zero byte
function pmix:get(rank, key, timeout) end

--- One key of many ranks: every `PMIx_Get_nb` issued at once, then one wait for all of them.
-- @tparam string key
-- @tparam {integer,...} ranks
-- @tparam[opt=60] number timeout seconds, for all of them
-- @treturn table got: `got[i]` is `ranks[i]`'s value, nil when it has none
-- @treturn {integer,...} missing: the ranks without a value
-- @treturn table why: `why[rank]`, the reason ("no answer within 5 s", PMIx's status)
-- @raise a rank out of range (named: "ranks[2]: ..."), a bad key
function pmix:get_all(key, ranks, timeout) end

--- Puts a value under key for the other ranks (`PMIx_Put`, a byte object); they see it after
-- `commit` (and, collected, after a `fence`).
-- @tparam string key 1 to 511 bytes
-- @tparam string value any bytes
-- @tparam[opt="global"] string scope "global", "local" (this node's ranks) or "remote"
-- @treturn true
-- @return[2] nil, message, errno
-- @errno EIO PMIx refused it (its status named)
function pmix:put(key, value, scope) end

--- Sends what was put to the local server (`PMIx_Commit`).
-- @treturn true
-- @return[2] nil, message, errno
-- @errno EIO PMIx refused it (its status named)
function pmix:commit() end

--- Waits until every process of the namespace reached this fence (`PMIx_Fence_nb`, no process
-- list), within the time limit.
-- @tparam[opt] table opts `collect`: true to have every rank's committed data brought to every
-- node (`PMIX_COLLECT_DATA`, the one info passed); `timeout`: seconds (default 60)
-- @treturn true
-- @return[2] nil, message, errno
-- @errno ETIMEDOUT not complete in time (a rank missing: `get_all` of a key every rank put
-- names it); EIO the launcher failed the fence (its status named)
-- @raise an unknown field, a negative timeout; SIGINT: "PMIx_Fence: interrupted"
function pmix:fence(opts) end

--- Asks the launcher to end every process of the job (`PMIx_Abort`).
-- @tparam[opt=1] integer status
-- @tparam[opt="aborted"] string msg
-- @treturn true when the launcher took the request (it then ends the job)
-- @return[2] nil, message, errno
-- @errno EIO PMIx refused it
function pmix:abort(status, msg) end

--- `PMIx_Finalize`, once (also its `__gc` and `__close`).
-- @treturn true
-- @return[2] nil, message, errno
-- @errno EIO PMIx_Finalize failed (the client is closed all the same)
function pmix:close() end

--- Whether `close` has run.
-- @treturn boolean
function pmix:is_closed() end

return pmix
