FROM torchyard-bf-base:py AS base
FROM base AS venv
RUN python3 -c "import sys; w = sys.stdout.buffer.write; w(b'\x1b[31mred\x1b[0m and bad bytes \xff\xfe\xc3\x28 here\n'); w(b'fetching https://ci:s3cr3t@index.corp.example/simple/torch/?token=abc123\n'); w(b'y' * 12000 + b'\n'); w(b'\x1b[1mERROR:\x1b[0m the index at https://ci:s3cr3t@index.corp.example/simple said no ' + b'z' * 3000 + b'\n')"; exit 3
