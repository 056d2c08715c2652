#!/usr/bin/env python3
"""gen_train.py - writes data/router/train.jsonl, the router's training set.

    python3 data/router/gen_train.py > data/router/train.jsonl

Python 3 standard library only; deterministic (fixed seed). The set combines
hand-written requests with phrasing templates over hand-written topic lists,
so every class is seen in many wordings, lengths and languages, as single
messages and inside multi-turn chats. Labels follow the guideline in
docs/router.md ("Labels"). data/router/eval.jsonl was written separately, by
hand, and is never read here.
"""
import json
import os
import random
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hand_train  # noqa: E402

R = random.Random(20261130)


def pick(xs):
    return R.choice(xs)


def cap(s):
    return s[:1].upper() + s[1:]


def vary(s):
    """Casual variants: lowercase, no final punctuation, extra please."""
    r = R.random()
    if r < 0.15:
        s = s.lower()
    elif r < 0.25:
        s = s.rstrip("?.!")
    elif r < 0.32:
        s = s + pick([" please", " thanks", " pls", " :)", " asap"])
    elif r < 0.36:
        s = pick(["Hey, ", "Hi! ", "Quick question: ", "Hello, ", "ok so ", "Question - "]) + s
    return s


# ----------------------------------------------------------------- code
LANGS = ["Python", "JavaScript", "TypeScript", "Java", "C", "C++", "C#", "Go", "Rust", "Ruby",
         "PHP", "Kotlin", "Swift", "Scala", "Haskell", "Lua", "Perl", "R", "Julia", "Elixir",
         "Dart", "Bash", "Zig", "OCaml", "Clojure", "F#", "MATLAB", "Fortran", "Nim"]
TASKS = [
    "parses an ISO 8601 date string", "merges two sorted arrays", "counts word frequencies in a text file",
    "checks whether a string is a valid email address", "computes the GCD of two integers",
    "removes duplicates from a list while keeping order", "reads a CSV file and prints the column averages",
    "implements a stack with push, pop and peek", "finds the longest common prefix of a list of strings",
    "converts Roman numerals to integers", "flattens a nested dictionary", "downloads a web page and counts the links",
    "implements quicksort", "validates a sudoku board", "generates all permutations of a list",
    "computes the moving average of a series", "implements a min-heap", "rotates a matrix 90 degrees",
    "parses command line arguments", "retries an HTTP request with exponential backoff",
    "serializes a binary tree to a string and back", "implements Dijkstra's shortest path",
    "checks if two strings are anagrams", "chunks a list into pieces of size n", "reads environment variables with defaults",
    "computes a SHA-256 hash of a file", "watches a directory for new files", "implements a simple rate limiter",
    "converts a number to its binary representation", "finds the median of two sorted arrays",
    "implements a trie with insert and search", "sends an email over SMTP", "parses a JSON config file",
    "writes a thread-safe counter", "computes the Levenshtein distance", "implements FizzBuzz",
    "resizes an image to a thumbnail", "implements a ring buffer", "detects a cycle in a linked list",
    "zips a folder", "paginates results from a REST API", "implements binary search on a sorted array",
    "counts the vowels in a string", "checks if a number is prime", "prints a multiplication table",
    "implements a bank account class with deposit and withdraw", "transposes a matrix",
    "validates a credit card number with the Luhn algorithm", "generates a random password",
    "groups a list of records by a key", "implements a producer-consumer queue", "tokenizes a math expression",
]
CODE_VERB = ["Write {a} {lang} function that {task}.", "Can you write {a} {lang} program that {task}?",
             "I need {a} {lang} snippet that {task}", "Show me how to write a function in {lang} that {task}.",
             "Implement a {lang} class that {task}.", "How would I write code in {lang} that {task}?",
             "give me {lang} code that {task}", "{lang}: write a function that {task}",
             "Please code a small {lang} utility that {task}.", "What's the idiomatic way in {lang} to write something that {task}?",
             "Write a script in {lang} that {task}, with comments.", "Could you implement, in {lang}, a routine that {task}?"]
ERRORS = [
    "IndexError: list index out of range", "TypeError: 'NoneType' object is not subscriptable",
    "Segmentation fault (core dumped)", "java.lang.NullPointerException", "error[E0382]: borrow of moved value",
    "ModuleNotFoundError: No module named 'requests'", "Uncaught ReferenceError: $ is not defined",
    "fatal: refusing to merge unrelated histories", "CORS policy: No 'Access-Control-Allow-Origin' header is present",
    "npm ERR! code ERESOLVE unable to resolve dependency tree", "KeyError: 'id'",
    "undefined reference to `pthread_create'", "error: expected ';' before '}' token",
    "ERROR 1045 (28000): Access denied for user 'root'@'localhost'", "panic: runtime error: invalid memory address or nil pointer dereference",
    "SyntaxError: unexpected EOF while parsing", "docker: Error response from daemon: port is already allocated",
    "UnicodeDecodeError: 'utf-8' codec can't decode byte 0xff", "Exception in thread \"main\" java.lang.OutOfMemoryError: Java heap space",
    "RecursionError: maximum recursion depth exceeded", "fatal error: stdio.h: No such file or directory",
    "Error: listen EADDRINUSE: address already in use :::3000", "ImportError: cannot import name 'x' from partially initialized module",
    "CrashLoopBackOff in my kubernetes pod", "psql: error: connection refused", "ssh: connect to host port 22: Connection timed out",
    "warning: implicit declaration of function 'malloc'", "ValueError: could not convert string to float: 'abc'",
    "TS2339: Property 'foo' does not exist on type '{}'", "bash: ./run.sh: Permission denied",
]
ERR_T = ["What does this error mean? {e}", "how do I fix {e}", "I'm getting `{e}`, any idea why?",
         "{e}\n\nwhat am I doing wrong", "Getting this when I run my code: {e}", "Can you help me debug this: {e}",
         "why would {e} happen?", "my build fails with: {e}"]
SNIPPETS = [
    "def f(xs):\n    return [x for x in xs if x % 2]",
    "for i in range(10):\nprint(i)",
    "let total = 0;\nitems.forEach(i => total += i.price);\nconsole.log(total)",
    "SELECT u.name, o.total FROM users u LEFT JOIN orders o ON o.user_id = u.id WHERE o.total > 100;",
    "int *p = malloc(10 * sizeof(int));\nfor (int i = 0; i <= 10; i++) p[i] = i;",
    "public static int max(int[] a) { int m = 0; for (int x : a) if (x > m) m = x; return m; }",
    "fn main() { let v = vec![1, 2, 3]; let w = v; println!(\"{:?}\", v); }",
    "grep -rn \"TODO\" . | wc -l",
    "while True:\n    line = input()\n    if not line: break\n    print(line[::-1])",
    "const res = await fetch(url);\nconst data = res.json();\nconsole.log(data.items);",
    "^\\d{3}-\\d{4}$",
    "x = {'a': 1}\nfor k in x:\n    del x[k]",
    "func add(a int, b int) int {\n\treturn a + b\n}",
    "#!/bin/bash\nfor f in *.txt; do mv $f ${f%.txt}.md; done",
    "UPDATE accounts SET balance = balance - 100 WHERE id = 7;",
    "class Dog:\n    def __init__(self, name):\n        name = name\n    def bark(self):\n        print(self.name)",
    "std::vector<int> v; for (auto it = v.begin(); it != v.end(); ++it) if (*it == 0) v.erase(it);",
    "server {\n  listen 80;\n  location / { proxy_pass http://localhost:3000; }\n}",
    "apiVersion: v1\nkind: Service\nmetadata:\n  name: web\nspec:\n  ports:\n  - port: 80",
    "import numpy as np\na = np.zeros((3,3))\na[1][1] = 5\nprint(a.sum())",
    "document.querySelector('#btn').addEventListener('click', () => alert('hi'))",
    "(defun square (x) (* x x))",
    "awk '{ s += $3 } END { print s / NR }' data.txt",
    "git log --oneline --graph --all",
    "df.groupby('city')['sales'].sum().sort_values(ascending=False).head(5)",
    "if (x = 5) { printf(\"five\"); }",
    "CREATE INDEX idx_users_email ON users(email);",
    "[[ -f config.ini ]] && source config.ini || echo missing",
    "val xs = listOf(3, 1, 2).sortedDescending()",
    "def fib(n): return n if n < 2 else fib(n-1) + fib(n-2)",
]
SNIP_T = ["Explain this code:\n\n{s}", "What does this do?\n{s}", "Is there a bug here?\n\n{s}",
          "Can you make this faster?\n{s}", "Add comments to this:\n\n{s}", "what's wrong with this\n```\n{s}\n```",
          "```\n{s}\n```\nexplain line by line", "Convert this to {lang}:\n{s}", "Review this please:\n\n{s}",
          "Rewrite this more idiomatically:\n{s}", "{s}\n\nwhy doesn't this work?", "How can I simplify this code?\n{s}"]
SHELL = [
    "find all files modified in the last 24 hours", "count the lines in every .py file recursively",
    "kill the process listening on port 3000", "show disk usage of each folder sorted by size",
    "extract a .tar.gz archive into a specific directory", "download a file with curl and follow redirects",
    "replace a word in all files of a directory", "list the 10 biggest files on the system",
    "check which version of glibc is installed", "tail a log file and filter lines containing ERROR",
    "create a symbolic link", "change the owner of a folder recursively", "see open network connections",
    "run a command every 10 seconds", "compress a folder into a zip", "copy files over ssh with rsync",
    "get the last 5 commits of a git repo", "add a user to the sudo group", "batch convert png images to jpg",
    "check the memory usage of a process", "print the 3rd column of a CSV", "mount a USB drive",
    "set an environment variable permanently", "split a big file into 100MB parts", "generate an SSH key",
]
SHELL_T = ["How do I {t} in bash?", "linux command to {t}", "What's the shell command to {t}?",
           "one-liner to {t}", "How can I {t} from the terminal?", "{t} - what's the command on Ubuntu?",
           "PowerShell: how to {t}?", "on macOS, how do I {t} in the terminal"]
SQL = [
    "find duplicate emails in a users table", "get the top 5 products by revenue", "count orders per day for the last month",
    "delete rows older than 90 days", "find employees who earn more than their manager", "pivot monthly sales into columns",
    "compute a running total of payments", "list customers who bought both product A and B",
    "find gaps in a sequence of invoice numbers", "select the latest row per user", "join three tables: students, courses, enrollments",
    "add a NOT NULL column with a default", "find the average rating per movie with at least 10 ratings",
    "rank salespeople by sales within each region", "update prices by 10% for one category", "create a table with a foreign key",
]
SQL_T = ["Write a SQL query to {t}.", "SQL: {t}", "How do I {t} in PostgreSQL?", "MySQL query that will {t}",
         "Need a query to {t}", "How would you {t} using SQL window functions?", "sqlite: {t}?"]
REGEX = [
    "matches a US phone number", "extracts all hashtags from a tweet", "validates a hex color code",
    "matches a strong password (8+ chars, a digit, an uppercase letter)", "captures the domain from a URL",
    "matches dates in dd/mm/yyyy format", "finds repeated words", "matches an IPv6 address",
    "strips HTML tags", "matches a semantic version like 1.2.3", "splits camelCase words", "matches a ZIP code",
    "finds all numbers with decimals", "matches lines that start with a timestamp", "validates a username of 3-16 letters, digits or underscores",
]
REGEX_T = ["Write a regex that {t}.", "regex which {t}", "I need a regular expression that {t}",
           "What regex {t}?", "Give me a Python regex that {t}", "JavaScript regex that {t}, please"]
CONFIG = [
    "a Dockerfile for a Python Flask app", "a docker-compose.yml with a web app and MySQL", "an nginx reverse proxy config",
    "a GitHub Actions workflow that builds a Go project", "a Kubernetes Service and Deployment for nginx",
    "a .editorconfig for a JavaScript project", "an Apache virtual host config", "a systemd timer that runs a backup script",
    "a webpack config for a React app", "a pyproject.toml for a small library", "an ESLint config with airbnb rules",
    "a CMakeLists.txt for a C++ project with tests", "a Helm chart values file for postgres", "a logrotate config for /var/log/myapp",
    "a crontab entry that runs at midnight on weekdays", "a tsconfig.json for a Node 20 project", "a Caddyfile with automatic HTTPS",
    "a prometheus scrape config", "an .htaccess file that removes .php from URLs", "a GitLab CI pipeline with test and deploy stages",
]
CONFIG_T = ["Write {t}.", "Can you give me {t}?", "I need {t}", "generate {t}", "What would {t} look like?",
            "Create {t} for me.", "Help me write {t}."]
CONCEPTS = [
    "recursion", "a hash table", "polymorphism", "garbage collection", "the event loop in Node.js", "a REST API",
    "Big O notation", "a race condition", "dependency injection", "a monad", "memoization", "a pointer in C",
    "async/await", "a linked list", "the difference between == and === in JavaScript", "Python decorators",
    "generics in Java", "ownership in Rust", "a deadlock", "SQL indexes", "virtual functions in C++", "microservices",
    "a closure", "unit testing", "git branching", "CSS flexbox", "the virtual DOM", "Docker containers vs virtual machines",
    "a binary search tree", "TCP handshakes", "OAuth 2.0", "lambda functions in Python", "interfaces in Go",
    "the stack and the heap", "a mutex", "immutability", "JIT compilation", "tail call optimization", "sharding a database",
]
CONCEPT_T = ["What is {t}?", "Explain {t} with an example.", "Can you explain {t} in simple terms, with code?",
             "what's {t} in programming", "ELI5 {t} (programming)", "How does {t} work? Show code.",
             "I don't understand {t}. Help?", "When should I use {t}?"]
GIT = ["undo a pushed commit", "squash my last three commits", "rename a branch", "resolve a merge conflict",
       "delete a remote branch", "see who changed a line", "stash only some files", "cherry-pick a commit",
       "remove a file from git but keep it locally", "change the last commit message", "clone only one branch",
       "revert a merge"]
GIT_T = ["How do I {t} in git?", "git: {t}", "what's the git command to {t}", "How can I {t}?"]
CODE_HAND = [
    "how do i print hello world in java", "make my python code use multiprocessing", "what's the fastest way to sort 1 million ints in C",
    "write a snake game in pygame", "implement a todo list in React with hooks", "why is my Python loop so slow",
    "explain what `export default` does", "how do I install a package with pip", "convert a string to int in Go",
    "how to iterate over a map in C++", "Write a Jupyter cell that plots a sine wave", "tail recursion in scala example",
    "what is the difference between an abstract class and an interface", "how to write a for loop in bash",
    "make an HTTP GET request in Rust", "write a linked list in python", "how do I debug a memory leak in Node",
    "Is Python pass by reference?", "what does `static` mean in C", "how to make a div scrollable",
    "write a hello world Express server", "read a file line by line in Java", "how to merge two dicts in Python",
    "What's the difference between git merge and git rebase?", "compile a C program with optimizations",
    "How do I set up ESLint and Prettier together?", "best way to store passwords in a database",
    "use pandas to merge two dataframes on a column", "train a linear regression with scikit-learn",
    "How do I write a Python generator?", "what is a segfault", "write an R script to plot a histogram",
    "Make a VBA macro that colors every other row", "How do I vectorize this numpy loop?",
    "how to handle exceptions in Kotlin coroutines", "write a bubble sort in assembly x86",
    "Solidity contract for a simple token", "What is the purpose of __init__.py?", "debounce vs throttle in JS",
    "How do I connect to MongoDB from Node?", "Write a Bash script to check if a website is up",
    "What's a good folder structure for a Flask app?", "LaTeX: how do I make a table with merged cells?",
    "Arduino code to blink an LED every second", "Unity C# script to make the player jump",
    "How do I mock a function in pytest?", "write a GraphQL schema for a blog", "how does `this` work in javascript",
    "Write a Prolog rule for grandparent", "how do I reverse a string in C++", "how to parse XML in python",
]
CODE_I18N = [
    "Écris une fonction JavaScript qui trie un tableau d'objets par date.", "Comment corriger l'erreur « undefined is not a function » ?",
    "Peux-tu écrire une requête SQL qui compte les commandes par client ?", "Comment créer une branche avec git ?",
    "Explique-moi les pointeurs en C avec un exemple.", "Écris un script bash qui sauvegarde un dossier.",
    "Escribe una función en Python que calcule el factorial.", "¿Qué significa este error? TypeError: undefined is not iterable",
    "¿Cómo leo un archivo JSON en Java?", "Necesito una expresión regular para validar un correo electrónico.",
    "¿Cómo se hace un bucle for en Rust?", "Explícame qué es una API REST con un ejemplo en Node.",
    "Schreibe eine Funktion in Java, die prüft, ob eine Zahl eine Primzahl ist.", "Wie lösche ich einen Branch in Git?",
    "Was bedeutet dieser Fehler: NullPointerException?", "Wie kann ich in Python eine Liste sortieren?",
    "Schreib ein Dockerfile für eine Node-Anwendung.", "Erkläre mir Rekursion mit einem Beispiel in C.",
    "写一个Python函数，计算列表的平均值", "这段代码有什么问题？for i in range(10) print(i)", "如何用SQL查询每个部门的最高工资？",
    "用JavaScript实现深拷贝", "解释一下什么是闭包，并给出代码示例", "怎么用git回滚到上一个版本？",
    "Rustで文字列を反転する関数を書いてください。", "このエラーの意味は？ IndexError: list index out of range",
    "JavaScriptで配列の重複を削除する方法は？", "SQLで日付ごとに集計するクエリを書いて", "Dockerfileの書き方を教えてください",
    "Напиши функцию на Python, которая проверяет палиндром.", "Что означает ошибка segmentation fault?",
    "Как в git отменить последний коммит?", "Напиши SQL-запрос для поиска дубликатов.", "Объясни, что такое рекурсия, на примере JavaScript.",
    "Escreva uma função em JavaScript que some os números de um array.", "Como faço um loop em Python?",
    "O que é uma classe abstrata em Java?", "Como criar uma tabela no PostgreSQL?",
    "Scrivi una funzione in C che calcola la lunghezza di una stringa.", "Come si fa un merge in git?",
    "Cosa significa l'errore 'index out of range' in Go?", "Scrivi una regex per validare un codice fiscale.",
    "Bir Python fonksiyonu yaz: listedeki en büyük sayıyı bulsun.", "Hoe schrijf ik een for-loop in Java?",
    "Napisz funkcję w Pythonie, która odwraca listę.", "파이썬으로 리스트를 정렬하는 방법은?",
]


def gen_code():
    out = []
    for _ in range(210):
        lang, task = pick(LANGS), pick(TASKS)
        t = pick(CODE_VERB).format(lang=lang, task=task, a="an" if lang[0] in "AEIOU" else "a")
        out.append(vary(t))
    for _ in range(60):
        out.append(vary(pick(ERR_T).format(e=pick(ERRORS))))
    for _ in range(90):
        out.append(pick(SNIP_T).format(s=pick(SNIPPETS), lang=pick(LANGS)))
    for _ in range(45):
        out.append(vary(pick(SHELL_T).format(t=pick(SHELL))))
    for _ in range(40):
        out.append(vary(pick(SQL_T).format(t=pick(SQL))))
    for _ in range(30):
        out.append(vary(pick(REGEX_T).format(t=pick(REGEX))))
    for _ in range(35):
        out.append(vary(pick(CONFIG_T).format(t=pick(CONFIG))))
    for _ in range(55):
        out.append(vary(pick(CONCEPT_T).format(t=pick(CONCEPTS))))
    for _ in range(18):
        out.append(vary(pick(GIT_T).format(t=pick(GIT))))
    out += [vary(x) for x in CODE_HAND]
    out += hand_train.lines(hand_train.CODE)
    out += CODE_I18N
    return out


# ----------------------------------------------------------------- prose
FORMS = ["short story", "poem", "haiku", "limerick", "essay", "blog post", "speech", "fairy tale", "song",
         "dialogue", "monologue", "bedtime story", "sonnet", "ballad", "diary entry", "letter", "fable",
         "short scene", "free verse poem", "children's story", "ghost story", "op-ed", "mini saga", "rap verse"]
TOPICS = ["a robot learning to paint", "the first snow of winter", "a lost umbrella", "friendship between a cat and a crow",
          "moving to a new country", "the ocean at night", "a grandmother's recipes", "a city without cars",
          "a time traveller stuck in 1850", "climbing a mountain", "the last day of summer", "a haunted library",
          "a chef who lost his sense of taste", "coffee", "a small bakery in Paris", "the life of a tree",
          "a spaceship's lonely engineer", "first love", "an old bicycle", "a storm at sea", "a village festival",
          "growing older", "a talking fox", "the moon", "a train journey across Siberia", "a lighthouse",
          "starting over after failure", "a garden in the desert", "a dog waiting for its owner", "Monday mornings",
          "a jazz musician in New Orleans", "a knight who hates fighting", "the smell of rain", "a mystery in a museum",
          "two strangers on a bus", "the end of the world", "a kid's first day at school", "a forgotten toy",
          "a pirate who can't swim", "winter in Moscow", "hope", "the sound of cities at dawn"]
FORM_T = ["Write a {f} about {t}.", "Can you write me a {f} about {t}?", "compose a {f} on {t}",
          "I'd love a {f} about {t}", "Tell me a {f} about {t}.", "Write a funny {f} about {t}.",
          "write a sad {f} about {t}", "Could you create a {f} inspired by {t}?", "Give me a {f} about {t}, around 300 words."]
RECIP = ["my manager", "a client", "my professor", "the school principal", "my neighbour", "HR", "a recruiter",
         "my team", "the city council", "a supplier", "my landlord", "my best friend", "a hotel", "my colleague",
         "customer support", "the editor of a magazine", "my child's teacher", "the board of directors"]
SUBJ = ["asking for a deadline extension", "about a late payment", "requesting a meeting next week",
        "apologizing for missing the call", "thanking them for their help", "about a noise complaint",
        "following up on a job application", "about a refund for a cancelled order", "announcing my resignation",
        "asking for a reference letter", "about a billing error", "requesting time off in August",
        "inviting them to our launch event", "about changes to the project scope", "complaining about a delay",
        "congratulating them on a promotion", "introducing myself as the new account manager", "asking for feedback on my report"]
EMAIL_T = ["Write an email to {r} {s}.", "Draft a message to {r} {s}.", "help me write an email to {r} {s}",
           "Can you write a polite email to {r} {s}?", "compose a short formal letter to {r} {s}",
           "I need to email {r} {s}. Can you draft it?"]
EXPLAIN = ["how photosynthesis works", "the causes of the Great Depression", "how the immune system fights viruses",
           "why the seasons change", "how airplanes stay in the air", "the theory of relativity", "how tides work",
           "the history of the printing press", "how democracy works in ancient Athens", "why we dream",
           "how compound interest works", "the causes of the French Revolution", "how volcanoes erupt",
           "how the heart pumps blood", "the importance of biodiversity", "what causes earthquakes",
           "the cold war", "how bees make honey", "the industrial revolution", "how memory works in the brain",
           "why leaves change color", "the greenhouse effect", "how elections work in the UK", "the life cycle of a star",
           "the difference between viruses and bacteria", "supply and demand", "how rainbows form",
           "the causes of World War I", "the role of the United Nations", "how language evolves",
           "the pros and cons of globalization", "the history of jazz", "how the placebo effect works",
           "what happens in the body during exercise", "how the Egyptians built the pyramids", "the Renaissance"]
EXPLAIN_T = ["Explain {t}.", "Can you explain {t}?", "Tell me about {t}.", "Help me understand {t}.",
             "Give me an overview of {t}.", "Explain {t} to a 10 year old.", "Describe {t} in detail.",
             "Write a few paragraphs on {t}.", "I'm studying for an exam - explain {t}.", "What do historians/scientists say about {t}?"]
GOALS = ["learn Spanish in six months", "save money for a house", "get fit after having a baby", "prepare for a job interview",
         "start a small online business", "stop procrastinating", "train for a half marathon", "organize a surprise party",
         "improve my public speaking", "plan a wedding on a budget", "move to another city", "write a novel",
         "become a better manager", "reduce stress at work", "eat healthier", "plan a two-week trip to Japan",
         "make friends in a new town", "study effectively for finals", "build a morning routine", "negotiate a raise",
         "start journaling", "decorate a small apartment", "prepare for retirement", "raise a bilingual child",
         "get better at chess", "deal with a difficult neighbour", "run a book club", "volunteer abroad"]
GOAL_T = ["Make me a plan to {g}.", "How can I {g}?", "Give me tips to {g}.", "What's the best way to {g}?",
          "I want to {g}. Where do I start?", "Create a step-by-step plan to {g}.", "Any advice on how to {g}?",
          "Help me {g} - I need a detailed plan."]
PAIRS = [("cats", "dogs as pets"), ("capitalism", "socialism"), ("living in the city", "living in the countryside"),
         ("Plato", "Aristotle"), ("electric cars", "hybrid cars"), ("reading books", "listening to audiobooks"),
         ("working from home", "working in an office"), ("tea", "coffee"), ("the Beatles", "the Rolling Stones"),
         ("public schools", "private schools"), ("Impressionism", "Expressionism"), ("renting", "buying a car"),
         ("studying abroad", "studying at home"), ("Stoicism", "Epicureanism")]
PAIR_T = ["Compare {a} and {b}.", "What are the differences between {a} and {b}?", "{a} vs {b}: discuss the pros and cons.",
          "Write a short essay comparing {a} and {b}."]
REWRITE = ["we r sorry the order was late, it wont happen again", "The meeting is moved. Come at 3.",
           "I think maybe we could possibly consider changing the plan if that's ok", "the product is good but expensive and the delivery was slow",
           "Our company makes software. We are good. Buy it.", "i cant come tomorrow, i am sick, sorry",
           "Thank you for your order we will ship it soon", "The results of the survey were not what we expected at all"]
REWRITE_T = ["Rewrite this to sound more professional: {t}", "Make this more polite: \"{t}\"", "Improve this text: {t}",
             "Turn this into a friendly paragraph: {t}", "Rephrase this for a formal letter: {t}", "Expand this into a paragraph: {t}"]
PROSE_HAND = [
    "What should I write in a birthday card for my dad?", "Tell me a story", "write me something nice for my girlfriend",
    "What are some good ways to motivate a team?", "Give me ideas for a 10-year-old's birthday party", "How do I become more confident?",
    "Describe your perfect weekend", "Write a paragraph about the importance of reading", "what are the benefits of yoga",
    "Why do people procrastinate?", "Write a short bio for my author page. I write thrillers set in Norway.",
    "Summarize the plot of The Great Gatsby", "What is the meaning of life according to different philosophers?",
    "Help me write a wedding speech as the best man", "Give me a pep talk, I failed my driving test",
    "Write an ad for a used bike I'm selling", "What would a day on Mars be like?", "How should I talk to my kids about divorce?",
    "Write the opening paragraph of a fantasy novel", "Describe a busy market in Marrakech", "What makes a good teacher?",
    "Write a condolence message for a coworker who lost her mother", "Explain the plot of Hamlet",
    "What are the arguments for a four-day work week?", "Tell me about the life of Leonardo da Vinci",
    "Write an apology letter to my neighbour for the party noise", "Write a travel guide entry for Lisbon",
    "How do I write a good personal statement for university?", "what are some habits of successful people",
    "Write a mission statement for a nonprofit animal shelter", "Describe the taste of mango to someone who never had one",
    "Give me a list of date ideas with a short description of each", "How can parents limit screen time without fights?",
    "Write a horoscope for Leo for next week, make it funny", "Explain why sleep is important for teenagers",
    "Write a letter to my future self", "What was the significance of the moon landing?", "write an inspiring quote and explain it",
    "Write a product launch announcement for a new running shoe", "Draft a short welcome speech for new employees",
    "Describe the ideal city of the future", "How can I support a friend with depression?", "Write an obituary for a beloved teacher",
    "What are the main themes of To Kill a Mockingbird?", "Write a review of the last movie you'd recommend",
    "Write a short essay on the role of art in society", "Give me a summary of the history of the internet for a school report",
]
PROSE_I18N = [
    "Écris une histoire courte sur un chat perdu à Paris.", "Rédige une lettre de motivation pour un poste de vendeur.",
    "Explique-moi les causes de la Révolution française.", "Donne-moi des conseils pour mieux dormir.",
    "Écris un poème sur l'hiver.", "Comment organiser un voyage en Italie ? Fais-moi un plan.",
    "Escribe un cuento corto sobre un niño y su perro.", "Redacta un correo a mi jefe pidiendo un aumento.",
    "Explícame cómo funciona el sistema solar.", "Dame consejos para aprender a cocinar.", "Escribe un poema de amor.",
    "¿Cuáles son las ventajas y desventajas de vivir en el extranjero?", "Schreibe eine kurze Geschichte über einen Roboter.",
    "Verfasse eine Bewerbung als Krankenpfleger.", "Erkläre die Ursachen des Zweiten Weltkriegs.",
    "Gib mir Tipps, wie ich produktiver arbeiten kann.", "Schreib ein Gedicht über den Herbst.",
    "写一个关于友谊的小故事", "给我的老师写一封感谢信", "解释一下全球变暖的原因和影响", "如何提高工作效率？请给出详细建议",
    "写一首关于月亮的诗", "帮我写一篇关于环保的演讲稿", "猫についての短い物語を書いてください。", "上司への謝罪メールを書いてください。",
    "地球温暖化について説明してください。", "日本旅行の計画を立てて。", "Напиши стихотворение о весне.",
    "Напиши письмо другу о моём отпуске.", "Объясни причины Первой мировой войны.", "Дай советы, как подготовиться к собеседованию.",
    "Escreva uma história sobre um pescador.", "Escreva um e-mail para o meu chefe pedindo férias.", "Explique como funciona a democracia.",
    "Scrivi una poesia sul mare.", "Scrivi una lettera di presentazione per un lavoro in banca.", "Spiegami la storia dell'Impero Romano.",
    "Schrijf een kort verhaal over een molen.", "Napisz opowiadanie o smoku.", "Bana İstanbul hakkında kısa bir deneme yaz.",
    "여름 방학에 대한 짧은 이야기를 써 줘.", "Viết một bài thơ về quê hương.",
]


def gen_prose():
    out = []
    for _ in range(170):
        out.append(vary(pick(FORM_T).format(f=pick(FORMS), t=pick(TOPICS))))
    for _ in range(90):
        out.append(vary(pick(EMAIL_T).format(r=pick(RECIP), s=pick(SUBJ))))
    for _ in range(100):
        out.append(vary(pick(EXPLAIN_T).format(t=pick(EXPLAIN))))
    for _ in range(75):
        out.append(vary(pick(GOAL_T).format(g=pick(GOALS))))
    for _ in range(25):
        a, b = pick(PAIRS)
        out.append(vary(pick(PAIR_T).format(a=a, b=b)))
    for _ in range(25):
        out.append(pick(REWRITE_T).format(t=pick(REWRITE)))
    out += [vary(x) for x in PROSE_HAND]
    out += hand_train.lines(hand_train.PROSE)
    out += PROSE_I18N
    return out


# ----------------------------------------------------------------- short
CAPITALS = ["France", "Japan", "Kenya", "Peru", "Norway", "Vietnam", "Egypt", "Chile", "Poland", "Thailand",
            "Morocco", "Portugal", "Argentina", "Nigeria", "Sweden", "Turkey", "Iran", "Cuba", "Nepal", "Ghana",
            "Hungary", "Ukraine", "Bolivia", "Finland", "Ireland", "Pakistan", "Colombia", "Greece", "Belgium", "Kazakhstan"]
CAP_T = ["What is the capital of {c}?", "capital of {c}?", "What's {c}'s capital city?", "Which city is the capital of {c}?",
         "{c} capital", "Tell me the capital of {c}."]
WHO = [("wrote", "War and Peace"), ("wrote", "Don Quixote"), ("wrote", "The Odyssey"), ("painted", "The Starry Night"),
       ("painted", "Guernica"), ("composed", "the Moonlight Sonata"), ("invented", "the light bulb"), ("discovered", "gravity"),
       ("wrote", "Harry Potter"), ("directed", "Jaws"), ("invented", "the World Wide Web"), ("sang", "Bohemian Rhapsody"),
       ("founded", "Microsoft"), ("discovered", "America in 1492"), ("wrote", "The Little Prince"), ("sculpted", "David"),
       ("developed", "the theory of relativity"), ("wrote", "One Hundred Years of Solitude"), ("invented", "the printing press"),
       ("founded", "Rome according to legend")]
WHO_T = ["Who {v} {x}?", "who {v} {x}", "Do you know who {v} {x}?", "Quick: who {v} {x}?"]
WHEN = ["the Titanic sink", "the French Revolution start", "humans first land on the moon", "the Eiffel Tower open",
        "the Soviet Union collapse", "the first iPhone come out", "Columbus reach America", "the Second World War start",
        "Shakespeare die", "the euro become a currency", "Nelson Mandela become president", "the internet get invented"]
WHEN_T = ["When did {x}?", "what year did {x}", "In which year did {x}?"]
FACTS = ["How many planets are in the solar system?", "What is the largest country by area?", "What's the smallest prime number?",
         "How many hours are in a week?", "What's the chemical formula of water?", "Which is the longest river in the world?",
         "What's the hardest natural substance?", "How many strings does a violin have?", "What's the closest star to Earth?",
         "How many teeth does an adult have?", "What color do you get mixing blue and yellow?", "Which gas do plants absorb?",
         "What's the fastest land animal?", "How many days are in February 2024?", "What's the main ingredient of guacamole?",
         "How many keys does a piano have?", "Which ocean is the deepest?", "What is the currency of Japan?",
         "What language is spoken in Argentina?", "How many zeros in a million?", "What's the tallest building in the world?",
         "What's the official language of Egypt?", "Which organ produces insulin?", "What's the largest planet?",
         "How many centimeters in an inch?", "What is the speed of sound?", "Who is the Greek god of the sea?",
         "What's the rarest blood type?", "Which country has the most people?", "How old is the universe?",
         "What does DNA stand for?", "What does NASA stand for?", "How many time zones does Russia have?",
         "What's the square root of 81?", "What's the melting point of ice?", "Which vitamin comes from sunlight?"]
YESNO = ["Is a whale a mammal?", "Is glass a liquid?", "Can dogs eat chocolate?", "Is the sun a star?",
         "Is zero an even number?", "Do fish sleep?", "Is Australia a continent?", "Is coffee a diuretic?",
         "Can you freeze milk?", "Is 1 a prime number?", "Is Spanish spoken in Brazil?", "Are bats blind?",
         "Is a peanut a nut?", "Does the Amazon flow into the Atlantic?", "Is Venus hotter than Mercury?",
         "Is English the official language of the US?", "Do penguins have knees?", "Is a strawberry a berry?",
         "Can lightning strike the same place twice?", "Is Tokyo bigger than New York?", "yes or no, is it safe to drink tap water in Germany?"]
GREET = ["hi", "hello", "hey there", "good morning!", "good evening", "yo", "hi, how are you?", "hello :)", "thanks!",
         "thank you", "thanks a lot", "bye", "see you later", "ok cool", "great, thanks", "nice", "lol", "perfect, thank you!",
         "what's up", "hey", "howdy", "morning", "cheers", "you're awesome", "ok", "got it, thanks", "hola", "salut",
         "guten Tag", "ciao!", "merci beaucoup", "gracias", "danke schön", "你好", "谢谢", "こんにちは", "ありがとう",
         "привет", "спасибо", "olá", "obrigado", "grazie mille", "안녕하세요", "are you a bot?", "who are you?", "what's your name?"]
PHRASES = ["good night", "how much does this cost", "I am hungry", "where is the bathroom", "happy birthday",
           "nice to meet you", "see you tomorrow", "excuse me", "I don't understand", "congratulations", "good luck",
           "the bill, please", "I'm sorry", "what time is it", "my name is Anna", "beautiful", "welcome", "I miss you"]
TLANGS = ["French", "Spanish", "German", "Italian", "Japanese", "Chinese", "Russian", "Portuguese", "Korean",
          "Arabic", "Dutch", "Swedish", "Greek", "Turkish", "Hindi", "Polish"]
TRANS_T = ["How do you say '{p}' in {l}?", "Translate '{p}' to {l}.", "'{p}' in {l}?", "What is '{p}' in {l}?",
           "how to say {p} in {l}", "{l} for \"{p}\"?"]
WORDS = ["ubiquitous", "serendipity", "melancholy", "pragmatic", "ambiguous", "benevolent", "candid", "resilient",
         "verbose", "nostalgia", "gregarious", "meticulous", "eloquent", "frugal", "ominous", "zeitgeist", "schadenfreude",
         "déjà vu", "ad hoc", "per se", "bona fide", "hygge", "wanderlust", "laconic"]
WORD_T = ["What does '{w}' mean?", "define {w}", "meaning of {w}", "synonym for {w}?", "What's the opposite of {w}?",
          "How do you spell {w}?", "Is '{w}' a noun or an adjective?", "Use '{w}' in a sentence."]
UNITS = [("miles", "kilometers"), ("pounds", "kilograms"), ("Fahrenheit", "Celsius"), ("inches", "centimeters"),
         ("liters", "gallons"), ("feet", "meters"), ("ounces", "grams"), ("hours", "seconds"), ("km/h", "mph"),
         ("acres", "hectares"), ("euros", "cents"), ("days", "hours")]
UNIT_T = ["Convert {n} {a} to {b}.", "{n} {a} in {b}?", "how many {b} is {n} {a}", "What is {n} {a} in {b}?"]
MATH_T = ["What is {a} {op} {b}?", "{a} {op} {b} =", "what's {a}{op}{b}", "calculate {a} {op} {b}", "{a} {op} {b}?",
          "Can you compute {a} {op} {b}?", "How much is {a} {op} {b}?", "quick maths: {a} {op} {b}"]
MATH_MISC = ["What is {a}% of {b}?", "Is {a} divisible by 3?", "What's the square root of {sq}?", "{a} squared?",
             "Round {a}.{b} to the nearest whole number", "What's half of {b}?", "Is {a} a prime number?",
             "What's {a} to the power of 3?", "average of {a} and {b}?"]
SHORT_I18N = [
    "Quelle est la capitale de l'Espagne ?", "Combien font 8 fois 7 ?", "Qui a écrit Les Misérables ?", "Comment dit-on 'chat' en anglais ?",
    "¿Cuál es la capital de Francia?", "¿Cuánto es 15 más 27?", "¿Quién pintó Las Meninas?", "¿Cómo se dice 'perro' en inglés?",
    "Was ist die Hauptstadt von Österreich?", "Wie viel ist 9 mal 6?", "Wer hat Faust geschrieben?", "Was heißt 'Apfel' auf Englisch?",
    "中国的首都是哪里？", "三加五等于多少？", "谁发明了电话？", "“猫”用英语怎么说？", "富士山の高さは？", "5かける6は？",
    "「ありがとう」は英語で何と言いますか？", "Какая столица Японии?", "Кто написал «Войну и мир»?", "Сколько будет 100 минус 37?",
    "Qual é a capital da Argentina?", "Quanto é 12 vezes 3?", "Chi ha dipinto la Gioconda?", "Quanto fa 7 più 8?",
    "Wat is de hoofdstad van België?", "Ile to jest 6 razy 7?", "Türkiye'nin başkenti neresi?", "한국의 수도는 어디입니까?",
    "Bonjour, ça va ?", "Hola, ¿qué tal?", "Guten Morgen!", "早上好", "おはようございます", "Добрый вечер!",
]


def gen_short():
    out = []
    for _ in range(55):
        out.append(vary(pick(CAP_T).format(c=pick(CAPITALS))))
    for _ in range(35):
        v, x = pick(WHO)
        out.append(vary(pick(WHO_T).format(v=v, x=x)))
    for _ in range(20):
        out.append(vary(pick(WHEN_T).format(x=pick(WHEN))))
    out += [vary(x) for x in FACTS + YESNO]
    out += GREET
    for _ in range(70):
        out.append(vary(pick(TRANS_T).format(p=pick(PHRASES), l=pick(TLANGS))))
    for _ in range(45):
        out.append(vary(pick(WORD_T).format(w=pick(WORDS))))
    for _ in range(35):
        a, b = pick(UNITS)
        out.append(vary(pick(UNIT_T).format(n=R.choice([1, 2, 3, 5, 10, 12, 20, 37, 100, 250, 0.5]), a=a, b=b)))
    for _ in range(70):
        a, b = R.randint(2, 999), R.randint(2, 99)
        op = pick(["+", "-", "*", "x", "/", "times", "plus", "minus", "divided by"])
        out.append(pick(MATH_T).format(a=a, b=b, op=op))
    for _ in range(35):
        a, b = R.randint(2, 200), R.randint(2, 999)
        out.append(pick(MATH_MISC).format(a=a, b=b, sq=R.randint(2, 40) ** 2))
    out += SHORT_I18N
    out += hand_train.lines(hand_train.SHORT)
    return out


# ----------------------------------------------------------------- long
PARAS = [
    "The quarterly report shows that revenue grew in every region except the north, where two large customers "
    "reduced their orders after the price change in April. The sales team believes that most of this loss is "
    "temporary, because both customers have asked for new quotes for next year. Costs rose faster than planned, "
    "mainly because of freight and the new warehouse lease. ",
    "Our hiking group met at the old bridge at seven in the morning. The weather forecast had promised sunshine, "
    "but a thick fog covered the valley and we could barely see the path. After an hour of climbing the fog lifted "
    "and the whole range appeared in front of us, still white with the last snow of the season. ",
    "Participants were recruited through posters at three public libraries and were paid a small fee for their "
    "time. Each session lasted about forty minutes. Responses were recorded, transcribed and coded independently "
    "by two researchers, who met weekly to resolve disagreements. ",
    "The tenant agrees to keep the property in good condition, to report any damage within seven days and not to "
    "make structural changes without written permission from the landlord. Rent is due on the first day of each "
    "month and a late fee applies after the fifth day. ",
    "In the beginning the village had only one well, and every morning the women walked there with clay jars on "
    "their heads. The well was deep and the water was cold even in August. Children were told stories about a "
    "spirit who lived at the bottom and who only spoke to those who were honest. ",
    "2024-06-01 12:00:01 INFO request id=8812 path=/login status=200 time=35ms\n"
    "2024-06-01 12:00:02 WARN request id=8813 path=/search status=200 time=1840ms slow\n"
    "2024-06-01 12:00:04 ERROR request id=8814 path=/checkout status=500 error=\"db timeout\"\n",
    "def process(records):\n    out = []\n    for r in records:\n        if r.get('status') == 'ok':\n"
    "            out.append(transform(r))\n        else:\n            log.warning('skipping %s', r['id'])\n    return out\n\n",
    "Customer feedback this month was mostly positive. Several people praised the new checkout page and the faster "
    "delivery times, while a few complained that the mobile app crashes when uploading photos. Support tickets "
    "about passwords dropped by a third after the reset flow was simplified. ",
    "La réunion a commencé à dix heures. Le directeur a présenté les résultats du trimestre et a annoncé que "
    "l'entreprise allait ouvrir un nouveau bureau à Lyon. Plusieurs employés ont posé des questions sur les "
    "horaires de travail et sur la possibilité de travailler à distance. ",
    "El informe anual describe un año difícil para la cooperativa. La sequía redujo la cosecha de aceitunas en "
    "casi un treinta por ciento, pero los precios más altos compensaron parte de las pérdidas. ",
]
LONG_ASK = ["Summarize this:\n\n", "Can you shorten this to a few sentences?\n", "Translate the following into German:\n\n",
            "What are the key points here?\n\n", "Proofread this text:\n", "Find the problems in this:\n\n",
            "Turn this into bullet points:\n", "", "Extract all dates and names from the text below.\n\n",
            "Here is a document, please answer questions about it. First: what is it about?\n\n"]


def gen_long(n):
    out = []
    while len(out) < n:
        body = ""
        while len(body) < 1100 + R.randint(0, 1500):
            body += pick(PARAS)
        ask = pick(LONG_ASK)
        out.append(ask + body if R.random() < 0.7 else body + "\n\n" + (ask.strip() or "Thoughts?"))
    return out


def near_gate():
    """Requests that carry 400-1000 characters of pasted material but stay under the gate."""
    out = []
    for _ in range(30):
        s = "\n".join(pick(SNIPPETS) for _ in range(R.randint(3, 6)))
        if len(s) < 1000:
            out.append(("code", pick(["What do these snippets do?\n\n", "Find the bugs:\n", "Review all of this:\n\n"]) + s))
    for _ in range(30):
        p = PARAS[R.choice([0, 1, 2, 3, 4, 7])]
        s = pick(["Make this sound better:\n\n", "Continue this text in the same style:\n", "Rewrite this for a general audience:\n\n"]) + p
        if R.random() < 0.5:
            s += PARAS[R.choice([1, 4, 7])]
        if len(s) < 1000:
            out.append(("prose", s))
    return out


# ----------------------------------------------------------------- other languages, by template
# Each language: request verbs for the three classes, with native topic lists, so the
# words that carry intent ("écris", "escribe", "写", "書いて", "напиши") are seen many times.
I18N = {
    "fr": {
        "code": ["Écris une fonction {L} qui {T}.", "Comment {T2} en {L} ?", "Peux-tu m'expliquer ce code {L} : {S}",
                 "J'ai cette erreur : {E}. Comment la corriger ?", "Écris une requête SQL pour {Q}.", "Quelle commande Linux permet de {H} ?"],
        "T": ["trie une liste", "lit un fichier CSV", "vérifie si un nombre est premier", "inverse une chaîne", "calcule une moyenne",
              "supprime les doublons d'un tableau", "envoie une requête HTTP"],
        "T2": ["lire un fichier", "faire une boucle", "créer une classe", "gérer les exceptions", "parser du JSON", "écrire des tests unitaires"],
        "Q": ["compter les clients par ville", "trouver les commandes du mois dernier", "calculer le total des ventes par produit"],
        "H": ["lister les fichiers cachés", "trouver un fichier par son nom", "voir l'espace disque", "tuer un processus"],
        "prose": ["Écris {F} sur {P}.", "Peux-tu rédiger {F} à propos de {P} ?", "Explique-moi {X}.", "Donne-moi des conseils pour {G}.",
                  "Rédige un e-mail à {R} pour {M}.", "Raconte-moi une histoire sur {P}.", "Fais-moi un plan pour {G}."],
        "F": ["un poème", "une nouvelle", "un conte", "un discours", "une lettre", "un article de blog", "une chanson"],
        "P": ["la mer", "mon grand-père", "un dragon timide", "l'automne à Paris", "l'amitié", "un voyage en train", "la forêt"],
        "X": ["l'effet de serre", "la Révolution industrielle", "le fonctionnement du cœur", "la photosynthèse", "la démocratie", "les marées"],
        "G": ["apprendre l'anglais", "mieux dormir", "préparer un marathon", "économiser de l'argent", "être plus organisé"],
        "R": ["mon patron", "mon propriétaire", "un client", "ma professeure", "le service client"],
        "M": ["demander un congé", "signaler une panne", "remercier pour son aide", "réclamer un remboursement", "annuler un rendez-vous"],
        "short": ["Quelle est la capitale {C} ?", "Combien font {A} {O} {B} ?", "Qui a {V} ?", "Comment dit-on « {W} » en anglais ?",
                  "Est-ce que {Y} ?", "Que veut dire « {W} » ?", "En quelle année {Z} ?"],
        "C": ["du Japon", "de l'Italie", "du Brésil", "de la Suède", "du Maroc", "de l'Inde"],
        "O": ["plus", "moins", "fois", "divisé par"],
        "V": ["écrit Le Petit Prince", "peint les Nymphéas", "inventé le téléphone", "découvert la pénicilline"],
        "W": ["bonjour", "fromage", "merci", "voiture", "je t'aime", "bonne nuit"],
        "Y": ["la Terre est ronde", "le soleil est une étoile", "les chats voient dans le noir", "Paris est plus grand que Lyon"],
        "Z": ["la tour Eiffel a-t-elle été construite", "a eu lieu la Révolution française", "l'homme a-t-il marché sur la Lune"],
    },
    "es": {
        "code": ["Escribe una función en {L} que {T}.", "¿Cómo {T2} en {L}?", "Explícame este código {L}: {S}",
                 "Tengo este error: {E}. ¿Cómo lo arreglo?", "Escribe una consulta SQL para {Q}.", "¿Qué comando de Linux sirve para {H}?"],
        "T": ["ordene una lista", "lea un archivo CSV", "compruebe si un número es primo", "invierta una cadena", "calcule el promedio",
              "elimine duplicados de un arreglo", "haga una petición HTTP"],
        "T2": ["leer un archivo", "hacer un bucle", "crear una clase", "manejar excepciones", "parsear JSON", "escribir pruebas unitarias"],
        "Q": ["contar clientes por ciudad", "obtener los pedidos del último mes", "sumar las ventas por producto"],
        "H": ["listar archivos ocultos", "buscar un archivo por nombre", "ver el espacio en disco", "matar un proceso"],
        "prose": ["Escribe {F} sobre {P}.", "¿Puedes escribir {F} acerca de {P}?", "Explícame {X}.", "Dame consejos para {G}.",
                  "Redacta un correo a {R} para {M}.", "Cuéntame una historia sobre {P}.", "Hazme un plan para {G}."],
        "F": ["un poema", "un cuento", "una fábula", "un discurso", "una carta", "una entrada de blog", "una canción"],
        "P": ["el mar", "mi abuela", "un dragón tímido", "el otoño en Madrid", "la amistad", "un viaje en tren", "el bosque"],
        "X": ["el efecto invernadero", "la Revolución Industrial", "cómo funciona el corazón", "la fotosíntesis", "la democracia", "las mareas"],
        "G": ["aprender inglés", "dormir mejor", "preparar un maratón", "ahorrar dinero", "ser más organizado"],
        "R": ["mi jefe", "mi casero", "un cliente", "mi profesora", "atención al cliente"],
        "M": ["pedir vacaciones", "avisar de una avería", "agradecer su ayuda", "pedir un reembolso", "cancelar una cita"],
        "short": ["¿Cuál es la capital {C}?", "¿Cuánto es {A} {O} {B}?", "¿Quién {V}?", "¿Cómo se dice «{W}» en inglés?",
                  "¿Es verdad que {Y}?", "¿Qué significa «{W}»?", "¿En qué año {Z}?"],
        "C": ["de Japón", "de Italia", "de Brasil", "de Suecia", "de Marruecos", "de la India"],
        "O": ["más", "menos", "por", "entre"],
        "V": ["escribió Cien años de soledad", "pintó el Guernica", "inventó el teléfono", "descubrió la penicilina"],
        "W": ["hola", "queso", "gracias", "coche", "te quiero", "buenas noches"],
        "Y": ["la Tierra es redonda", "el sol es una estrella", "los gatos ven en la oscuridad", "Madrid es más grande que Sevilla"],
        "Z": ["se construyó la torre Eiffel", "empezó la Revolución francesa", "llegó el hombre a la Luna"],
    },
    "de": {
        "code": ["Schreib eine {L}-Funktion, die {T}.", "Wie kann ich in {L} {T2}?", "Erklär mir diesen {L}-Code: {S}",
                 "Ich bekomme diesen Fehler: {E}. Wie behebe ich ihn?", "Schreib eine SQL-Abfrage, um {Q}.", "Mit welchem Linux-Befehl kann ich {H}?"],
        "T": ["eine Liste sortiert", "eine CSV-Datei einliest", "prüft, ob eine Zahl prim ist", "einen String umdreht", "den Durchschnitt berechnet",
              "Duplikate aus einem Array entfernt", "eine HTTP-Anfrage sendet"],
        "T2": ["eine Datei lesen", "eine Schleife schreiben", "eine Klasse anlegen", "Ausnahmen behandeln", "JSON parsen", "Unit-Tests schreiben"],
        "Q": ["Kunden pro Stadt zu zählen", "die Bestellungen des letzten Monats zu finden", "den Umsatz pro Produkt zu summieren"],
        "H": ["versteckte Dateien anzeigen", "eine Datei nach Namen suchen", "den freien Speicherplatz sehen", "einen Prozess beenden"],
        "prose": ["Schreib {F} über {P}.", "Kannst du {F} über {P} schreiben?", "Erkläre mir {X}.", "Gib mir Tipps, wie ich {G}.",
                  "Formuliere eine E-Mail an {R}, um {M}.", "Erzähl mir eine Geschichte über {P}.", "Mach mir einen Plan, wie ich {G}."],
        "F": ["ein Gedicht", "eine Kurzgeschichte", "ein Märchen", "eine Rede", "einen Brief", "einen Blogartikel", "ein Lied"],
        "P": ["das Meer", "meine Oma", "einen schüchternen Drachen", "den Herbst in Berlin", "Freundschaft", "eine Zugreise", "den Wald"],
        "X": ["den Treibhauseffekt", "die industrielle Revolution", "wie das Herz funktioniert", "die Photosynthese", "die Demokratie", "Ebbe und Flut"],
        "G": ["Englisch lerne", "besser schlafe", "mich auf einen Marathon vorbereite", "Geld spare", "organisierter werde"],
        "R": ["meinen Chef", "meinen Vermieter", "einen Kunden", "meine Lehrerin", "den Kundenservice"],
        "M": ["Urlaub zu beantragen", "einen Schaden zu melden", "mich für die Hilfe zu bedanken", "eine Rückerstattung zu verlangen", "einen Termin abzusagen"],
        "short": ["Was ist die Hauptstadt von {C}?", "Was ist {A} {O} {B}?", "Wer hat {V}?", "Was heißt „{W}“ auf Englisch?",
                  "Stimmt es, dass {Y}?", "Was bedeutet „{W}“?", "In welchem Jahr {Z}?"],
        "C": ["Japan", "Italien", "Brasilien", "Schweden", "Marokko", "Indien"],
        "O": ["plus", "minus", "mal", "geteilt durch"],
        "V": ["den Zauberberg geschrieben", "die Mona Lisa gemalt", "das Telefon erfunden", "das Penicillin entdeckt"],
        "W": ["Hallo", "Käse", "danke", "Auto", "ich liebe dich", "gute Nacht"],
        "Y": ["die Erde rund ist", "die Sonne ein Stern ist", "Katzen im Dunkeln sehen", "Hamburg größer als Köln ist"],
        "Z": ["wurde die Berliner Mauer gebaut", "begann der Erste Weltkrieg", "landete der Mensch auf dem Mond"],
    },
    "it": {
        "code": ["Scrivi una funzione {L} che {T}.", "Come si fa a {T2} in {L}?", "Spiegami questo codice {L}: {S}",
                 "Ho questo errore: {E}. Come lo risolvo?", "Scrivi una query SQL per {Q}.", "Quale comando Linux serve per {H}?"],
        "T": ["ordina una lista", "legge un file CSV", "controlla se un numero è primo", "inverte una stringa", "calcola la media"],
        "T2": ["leggere un file", "fare un ciclo", "creare una classe", "gestire le eccezioni", "fare il parsing di JSON"],
        "Q": ["contare i clienti per città", "trovare gli ordini dell'ultimo mese"],
        "H": ["elencare i file nascosti", "cercare un file per nome", "vedere lo spazio su disco"],
        "prose": ["Scrivi {F} su {P}.", "Spiegami {X}.", "Dammi dei consigli per {G}.", "Scrivi un'email a {R} per {M}.", "Raccontami una storia su {P}."],
        "F": ["una poesia", "un racconto", "una favola", "un discorso", "una lettera"],
        "P": ["il mare", "mia nonna", "un drago timido", "l'autunno a Roma", "l'amicizia"],
        "X": ["l'effetto serra", "la rivoluzione industriale", "come funziona il cuore", "la fotosintesi"],
        "G": ["imparare l'inglese", "dormire meglio", "risparmiare soldi", "essere più organizzato"],
        "R": ["il mio capo", "il padrone di casa", "un cliente"],
        "M": ["chiedere ferie", "segnalare un guasto", "ringraziare per l'aiuto"],
        "short": ["Qual è la capitale {C}?", "Quanto fa {A} {O} {B}?", "Chi ha {V}?", "Come si dice «{W}» in inglese?", "Cosa significa «{W}»?"],
        "C": ["del Giappone", "della Francia", "del Brasile", "della Svezia"],
        "O": ["più", "meno", "per", "diviso"],
        "V": ["scritto la Divina Commedia", "dipinto la Primavera", "inventato la radio"],
        "W": ["ciao", "formaggio", "grazie", "macchina", "buonanotte"],
    },
    "pt": {
        "code": ["Escreva uma função em {L} que {T}.", "Como {T2} em {L}?", "Explique este código {L}: {S}",
                 "Estou com este erro: {E}. Como resolvo?", "Escreva uma consulta SQL para {Q}."],
        "T": ["ordene uma lista", "leia um arquivo CSV", "verifique se um número é primo", "inverta uma string", "calcule a média"],
        "T2": ["ler um arquivo", "fazer um laço", "criar uma classe", "tratar exceções", "ler JSON"],
        "Q": ["contar clientes por cidade", "buscar os pedidos do último mês"],
        "prose": ["Escreva {F} sobre {P}.", "Explique {X}.", "Me dê dicas para {G}.", "Escreva um e-mail para {R} para {M}.", "Conte uma história sobre {P}."],
        "F": ["um poema", "um conto", "uma fábula", "um discurso", "uma carta"],
        "P": ["o mar", "minha avó", "um dragão tímido", "o outono em Lisboa", "a amizade"],
        "X": ["o efeito estufa", "a Revolução Industrial", "como funciona o coração", "a fotossíntese"],
        "G": ["aprender inglês", "dormir melhor", "economizar dinheiro", "ser mais organizado"],
        "R": ["meu chefe", "o proprietário", "um cliente"],
        "M": ["pedir férias", "avisar de um problema", "agradecer a ajuda"],
        "short": ["Qual é a capital {C}?", "Quanto é {A} {O} {B}?", "Quem {V}?", "Como se diz \"{W}\" em inglês?", "O que significa \"{W}\"?"],
        "C": ["do Japão", "da França", "do Chile", "da Suécia"],
        "O": ["mais", "menos", "vezes", "dividido por"],
        "V": ["escreveu Os Lusíadas", "pintou a Mona Lisa", "inventou o avião"],
        "W": ["saudade", "queijo", "obrigado", "carro", "boa noite"],
    },
    "ru": {
        "code": ["Напиши функцию на {L}, которая {T}.", "Как {T2} на {L}?", "Объясни этот код на {L}: {S}",
                 "У меня ошибка: {E}. Как исправить?", "Напиши SQL-запрос, чтобы {Q}.", "Какой командой Linux можно {H}?"],
        "T": ["сортирует список", "читает CSV-файл", "проверяет, простое ли число", "переворачивает строку", "считает среднее"],
        "T2": ["прочитать файл", "написать цикл", "создать класс", "обработать исключения", "распарсить JSON"],
        "Q": ["посчитать клиентов по городам", "найти заказы за прошлый месяц"],
        "H": ["показать скрытые файлы", "найти файл по имени", "посмотреть свободное место на диске"],
        "prose": ["Напиши {F} о {P}.", "Объясни {X}.", "Дай советы, как {G}.", "Напиши письмо {R}, чтобы {M}.", "Расскажи историю про {P}."],
        "F": ["стихотворение", "рассказ", "сказку", "речь", "письмо"],
        "P": ["море", "бабушке", "робота", "осени в Москве", "дружбе"],
        "X": ["парниковый эффект", "промышленную революцию", "как работает сердце", "фотосинтез"],
        "G": ["выучить английский", "лучше спать", "копить деньги", "стать организованнее"],
        "R": ["начальнику", "арендодателю", "клиенту"],
        "M": ["попросить отпуск", "сообщить о поломке", "поблагодарить за помощь"],
        "short": ["Какая столица {C}?", "Сколько будет {A} {O} {B}?", "Кто {V}?", "Как сказать «{W}» по-английски?", "Что значит «{W}»?"],
        "C": ["Японии", "Франции", "Бразилии", "Швеции"],
        "O": ["плюс", "минус", "умножить на", "разделить на"],
        "V": ["написал «Евгения Онегина»", "изобрёл радио", "открыл периодический закон"],
        "W": ["привет", "сыр", "спасибо", "машина", "спокойной ночи"],
    },
    "zh": {
        "code": ["用{L}写一个函数，{T}", "在{L}里怎么{T2}？", "解释一下这段{L}代码：{S}", "我遇到这个错误：{E}，怎么解决？", "写一个SQL查询，{Q}", "Linux下用什么命令{H}？"],
        "T": ["对列表排序", "读取CSV文件", "判断一个数是不是质数", "反转字符串", "计算平均值"],
        "T2": ["读文件", "写循环", "定义类", "处理异常", "解析JSON"],
        "Q": ["统计每个城市的客户数", "查询上个月的订单"],
        "H": ["查看隐藏文件", "按名字查找文件", "查看磁盘空间"],
        "prose": ["写一{F}关于{P}的作品", "请解释{X}", "给我一些{G}的建议", "帮我给{R}写一封邮件，{M}", "讲一个关于{P}的故事", "帮我制定一个{G}的计划"],
        "F": ["首诗，", "篇短文，", "个童话，", "篇演讲稿，", "封信，"],
        "P": ["大海", "我的奶奶", "一只害羞的龙", "北京的秋天", "友谊"],
        "X": ["温室效应", "工业革命", "心脏是怎么工作的", "光合作用"],
        "G": ["学英语", "改善睡眠", "存钱", "提高效率"],
        "R": ["老板", "房东", "客户"],
        "M": ["请假", "报修", "表示感谢"],
        "short": ["{C}的首都是哪里？", "{A}{O}{B}等于多少？", "谁{V}？", "“{W}”用英语怎么说？", "“{W}”是什么意思？"],
        "C": ["日本", "法国", "巴西", "瑞典"],
        "O": ["加", "减", "乘以", "除以"],
        "V": ["写了红楼梦", "发明了印刷术", "发现了万有引力"],
        "W": ["你好", "奶酪", "谢谢", "汽车", "晚安"],
    },
    "ja": {
        "code": ["{L}で{T}関数を書いてください。", "{L}で{T2}方法は？", "この{L}のコードを説明して：{S}", "このエラーが出ます：{E}　どう直せばいい？",
                 "{Q}SQLを書いてください。", "Linuxで{H}コマンドは？"],
        "T": ["リストをソートする", "CSVファイルを読む", "素数かどうか判定する", "文字列を反転する", "平均を計算する"],
        "T2": ["ファイルを読む", "ループを書く", "クラスを作る", "例外を処理する", "JSONをパースする"],
        "Q": ["都市ごとの顧客数を数える", "先月の注文を取得する"],
        "H": ["隠しファイルを表示する", "名前でファイルを探す", "ディスク容量を確認する"],
        "prose": ["{P}についての{F}を書いてください。", "{X}について説明してください。", "{G}ためのアドバイスをください。",
                  "{R}に{M}メールを書いて。", "{P}の物語を聞かせて。"],
        "F": ["詩", "短編小説", "童話", "スピーチ", "手紙"],
        "P": ["海", "祖母", "内気なドラゴン", "京都の秋", "友情"],
        "X": ["温室効果", "産業革命", "心臓の仕組み", "光合成"],
        "G": ["英語を勉強する", "よく眠る", "お金を貯める", "整理整頓する"],
        "R": ["上司", "大家さん", "お客様"],
        "M": ["休暇をお願いする", "故障を報告する", "お礼を伝える"],
        "short": ["{C}の首都はどこ？", "{A}{O}{B}は？", "{V}のは誰？", "「{W}」は英語で何と言いますか？", "「{W}」の意味は？"],
        "C": ["フランス", "イタリア", "ブラジル", "スウェーデン"],
        "O": ["足す", "引く", "かける", "割る"],
        "V": ["源氏物語を書いた", "電話を発明した", "ペニシリンを発見した"],
        "W": ["こんにちは", "チーズ", "ありがとう", "車", "おやすみ"],
    },
}
I18N_SNIPS = ["x = [i*i for i in range(5)]", "for (int i = 0; i < n; i++) sum += a[i];", "SELECT * FROM t WHERE id = 1;",
              "const f = a => a.map(x => x * 2);", "ls -la | grep txt", "if err != nil { return err }"]
I18N_ERRS = ["IndexError: list index out of range", "NullPointerException", "Segmentation fault", "SyntaxError: invalid syntax",
             "permission denied", "ModuleNotFoundError: No module named 'numpy'"]


def fill(t, d):
    out = t
    for k in sorted(d, key=len, reverse=True):
        if len(k) <= 2 and k.isupper() and "{" + k + "}" in out:
            out = out.replace("{" + k + "}", pick(d[k]))
    out = out.replace("{L}", pick(["Python", "Java", "C", "JavaScript", "Go", "Rust", "C++", "PHP"]))
    out = out.replace("{S}", pick(I18N_SNIPS)).replace("{E}", pick(I18N_ERRS))
    out = out.replace("{A}", str(R.randint(2, 500))).replace("{B}", str(R.randint(2, 60)))
    return out


def gen_i18n():
    rows = []
    for lang, d in I18N.items():
        for label in ("code", "prose", "short"):
            seen = set()
            for _ in range(22):
                t = fill(pick(d[label]), d)
                if "{" in t or t in seen:
                    continue
                seen.add(t)
                rows.append((label, t))
    return rows


# ----------------------------------------------------------------- multi-turn wrappers
OPENERS = [("hi", "Hello! How can I help you today?"), ("hey there", "Hi! What can I do for you?"),
           ("I have a question", "Sure, go ahead."), ("Can you help me?", "Of course. What do you need?"),
           ("bonjour", "Bonjour ! Comment puis-je vous aider ?"), ("hola", "¡Hola! ¿En qué te ayudo?")]
SYSTEMS = ["You are a helpful assistant.", "You are a concise assistant. Keep answers short.",
           "You are ChatBot, a friendly AI.", "Answer the user's questions accurately.", "You are an expert tutor."]


def wrap(text):
    r = R.random()
    if r < 0.10:
        u, a = pick(OPENERS)
        return {"messages": [{"role": "user", "content": u}, {"role": "assistant", "content": a},
                             {"role": "user", "content": text}]}
    if r < 0.22:
        return {"messages": [{"role": "system", "content": pick(SYSTEMS)}, {"role": "user", "content": text}]}
    return {"text": text}


FOLLOWUPS = {
    "code": [("Write a Python function to reverse a list.", "```python\ndef rev(xs):\n    return xs[::-1]\n```", "now without slicing"),
             ("How do I read a file in Go?", "Use os.ReadFile: ```go\ndata, err := os.ReadFile(\"a.txt\")\n```", "and line by line?"),
             ("my SQL query is slow", "Can you share the query?", "SELECT * FROM logs WHERE msg LIKE '%fail%'"),
             ("Explain recursion", "Recursion is when a function calls itself... ```js\nfunction f(n){return n?n*f(n-1):1}\n```", "show it in C too"),
             ("Write a regex for emails", "`^[^@\\s]+@[^@\\s]+\\.[^@\\s]+$`", "make it reject spaces in the domain")],
    "prose": [("Write a poem about the sea", "The sea rolls in with silver light...", "make it longer and sadder"),
              ("I need a cover letter", "Sure! What is the job?", "A librarian position at the city library. I have 5 years of experience."),
              ("Tell me about ancient Egypt", "Ancient Egypt was a civilization along the Nile...", "what about their religion?"),
              ("plan my weekend in Prague", "Day 1: Old Town Square...", "add some vegetarian restaurants and evening activities")],
    "short": [("capital of Italy?", "Rome.", "and of Spain?"), ("what's 5+5", "10", "times 3?"),
              ("Translate 'hello' to French", "Bonjour.", "and to Italian?"), ("Who wrote Macbeth?", "William Shakespeare.", "thanks!")],
}


def main():
    rows = []
    for label, gen in (("code", gen_code), ("prose", gen_prose), ("short", gen_short)):
        seen = set()
        for t in gen():
            if t in seen:
                continue
            seen.add(t)
            r = wrap(t)
            r["label"] = label
            rows.append(r)
        for u1, a1, u2 in FOLLOWUPS[label]:
            rows.append({"label": label, "messages": [{"role": "user", "content": u1}, {"role": "assistant", "content": a1},
                                                      {"role": "user", "content": u2}]})
    for label, t in gen_i18n():
        r = wrap(t)
        r["label"] = label
        rows.append(r)
    for label, t in near_gate():
        rows.append({"label": label, "text": t})
    for t in gen_long(60):
        rows.append({"label": "long", "text": t})
    R.shuffle(rows)
    for r in rows:
        out = {"label": r.pop("label")}
        out.update(r)
        print(json.dumps(out, ensure_ascii=False))


if __name__ == "__main__":
    main()
