--- A legacy OFED 1.x XRC domain (`context:open_xrc_domain`), implemented in Lua over `ibverbs.xrcd`
-- and `ibv_open_qp`.  Its methods are the `ibverbs.xrc_*` functions with the domain first.
-- @classmod ibverbs.xrc_domain

local xrc_domain = {}

--- Creates a shared receive QP (see `ibverbs.create_xrc_rcv_qp`).
-- @tparam[opt] table init_attr
-- @treturn integer qpn
-- @return[2] nil, message, errno
-- @errno EOPNOTSUPP, ENOMEM
function xrc_domain:create_xrc_rcv_qp(init_attr) end

--- Modifies a receive QP by number (`ibverbs.modify_xrc_rcv_qp`).
-- @tparam integer qpn
-- @tparam table attr
function xrc_domain:modify_xrc_rcv_qp(qpn, attr) end

--- Queries a receive QP by number (`ibverbs.query_xrc_rcv_qp`).
-- @tparam integer qpn
function xrc_domain:query_xrc_rcv_qp(qpn) end

--- Adds a registration with a receive QP (`ibverbs.reg_xrc_rcv_qp`).
-- @tparam integer qpn
function xrc_domain:reg_xrc_rcv_qp(qpn) end

--- Drops a registration (`ibverbs.unreg_xrc_rcv_qp`).
-- @tparam integer qpn
function xrc_domain:unreg_xrc_rcv_qp(qpn) end

--- This process's registrations on a receive QP (`ibverbs.xrc_rcv_registrations`).
-- @tparam integer qpn
function xrc_domain:xrc_rcv_registrations(qpn) end

--- Closes the domain (also `close_xrc_domain`).
-- @treturn true
-- @return[2] nil, message, errno
-- @errno EBUSY registrations, XRC SRQs or send QPs remain
function xrc_domain:close() end

--- Same as `close`.
function xrc_domain:close_xrc_domain() end

--- Whether `close` has run.
-- @treturn boolean
function xrc_domain:is_closed() end

return xrc_domain
