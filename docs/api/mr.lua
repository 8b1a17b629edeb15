--- A memory region (`struct ibv_mr`), made by `pd:reg_mr`.
--
-- Fields (read only): `addr`, `length`, `lkey`, `rkey`, `handle`; `#mr` is its length.
-- Offsets are 0-based and checked against the region: out of range raises.
--
--     local mr = assert(pd:reg_mr(4096, {"local_write", "remote_read"}))
--     mr:write(0, "ping"); print(mr:read(0, 4), mr.lkey, mr.rkey)
--
-- @classmod ibverbs.mr

local mr = {}

--- Reads bytes of the region.
-- @tparam integer offset
-- @tparam integer length
-- @treturn string
function mr:read(offset, length) end

--- Writes a string into the region.
-- @tparam integer offset
-- @tparam string s
-- @treturn integer the number of bytes written
function mr:write(offset, s) end

--- Reads or writes a host-order 64-bit word (atomics' operands and results).
-- @tparam integer offset
-- @tparam[opt] integer value to write; without it, the word is read
-- @treturn integer the word read (nothing when writing)
function mr:u64(offset, value) end

--- Re-registers the region (`ibv_rereg_mr`) with other access flags or on another PD.
-- @tparam table attr `access` (flags or names), `pd`
-- @treturn true
-- @return[2] nil, message, errno
-- @errno EOPNOTSUPP the provider lacks it (rxe); EINVAL; EBUSY MWs bound to it
function mr:rereg(attr) end

--- Deregisters the region (`ibv_dereg_mr`), then frees the memory it owns.
-- @treturn true
-- @return[2] nil, message, errno
-- @errno EBUSY while a memory window is bound to it, or a prepared WR list points into it
function mr:close() end

--- Whether `close` has run.
-- @treturn boolean
function mr:is_closed() end

return mr
