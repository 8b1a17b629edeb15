-- An LDoc filter (ldoc --filter ldoc_items.print): one line per documented
-- item, "module<TAB>item<TAB>kind<TAB>summary", for spec/host/project/doc_spec.lua.
local M = {}

function M.print(module_list)
  for mod in module_list:iter() do
    for item in mod.items:iter() do
      local summary = (item.summary or ""):gsub("%s+", " ")
      io.write(mod.name, "\t", item.name, "\t", item.type or "", "\t", summary, "\n")
    end
  end
end

return M
