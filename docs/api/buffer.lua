--- Page-aligned, zeroed memory the script owns (`ibverbs.buffer(n)`), registered with `pd:reg_mr`.
--
-- Fields: `addr`; `#buf` is its size.  The memory is freed when the buffer is closed or
-- collected and no MR registers it any more.
--
--     local buf = ibv.buffer(8192)
--     local mr = assert(pd:reg_mr(buf, ibv.ACCESS_LOCAL_WRITE, 4096, 4096))
--
-- @classmod ibverbs.buffer

local buffer = {}

--- Reads bytes.
-- @tparam integer offset 0-based
-- @tparam integer length
-- @treturn string
function buffer:read(offset, length) end

--- Writes a string.
-- @tparam integer offset
-- @tparam string s
-- @treturn integer bytes written
function buffer:write(offset, s) end

--- Reads or writes a host-order 64-bit word.
-- @tparam integer offset
-- @tparam[opt] integer value
-- @treturn integer the word read
function buffer:u64(offset, value) end

--- Drops the script's hold on the memory (freed once no MR uses it).
-- @treturn true
function buffer:close() end

--- Whether `close` has run.
-- @treturn boolean
function buffer:is_closed() end

return buffer
