std = "max"
max_line_length = 120
files["spec/**/*_spec.lua"] = { std = "+busted" }
exclude_files = { ".cache/**", "build/**" }
