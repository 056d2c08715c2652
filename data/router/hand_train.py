"""hand_train.py - hand-written training requests (imported by gen_train.py).

One request a line, each written on its own rather than from a template, so
the model also sees wordings no template produces. Kept apart from
data/router/eval.jsonl, which was written separately and is never read here.
"""

CODE = """
how do I make a python script run forever in the background
Write a function that returns the k most common elements in an array
What's the cleanest way to handle optional values in Swift?
rust lifetimes confuse me, what does 'a mean
show me a minimal websocket server in node
Write an efficient algorithm to detect if a graph is bipartite.
can u fix my code it doesnt compile: int x = "5";
best practices for structuring a large Vue app
How can I speed up my Django ORM queries that use foreign keys?
Convert this bash loop to a Makefile rule
Why does my pandas merge create duplicate rows?
Make a Chrome extension that changes the background color of every page
Write a Terraform module for an AWS VPC with two subnets
How do I paginate with cursor-based pagination in a REST API?
What's the difference between INNER JOIN and LEFT JOIN?
Write a multithreaded web crawler in Java
How do I store secrets in a Kubernetes cluster?
write a python decorator that times a function
In C#, how do I read appsettings.json?
Explain how React's useState works under the hood
Write a Redis Lua script that increments a counter with an expiry
How to write a custom hook in React for form validation
How do I profile memory in a Python program?
Compare threads and asyncio in Python with examples
Create a Bash function that prints colored output
Write a shader in GLSL that makes a gradient from red to blue
How do I make a POST request with axios and handle errors?
How do I upgrade all pip packages at once?
What is the difference between a list and a tuple in Python?
Write an SQL trigger that logs every delete on the users table
Why is my Docker image 2GB? How can I make it smaller?
Write a Go worker pool with 5 goroutines
Implement a debounce hook in TypeScript
How do I deploy a static site to GitHub Pages?
My C++ program gives different results with -O2, why?
Write an algorithm that finds all prime numbers up to n (sieve)
What does `set -euo pipefail` do in a shell script?
explain what a JWT is and how to verify one in python
Write a function to deep clone an object in JavaScript
How to set up a Python project with poetry
Help me write a Jenkinsfile for a Maven build
Write a CSS animation that makes a button pulse
How do I catch multiple exceptions in one line in python
Implement the observer pattern in C++
Write a function that validates a JSON schema in Node
What is a race condition and how do I prevent one in Go?
How do I write a recursive CTE in PostgreSQL?
Write a python one-liner to read a file into a list of lines
Explain the difference between git fetch and git pull
Refactor this into smaller functions: a 200-line main() that parses args, reads files and prints a report
What's a good way to structure error handling in a Rust CLI?
I want to scrape a website with BeautifulSoup, how do I start?
Write an HTML form with name, email and a submit button
How to convert a pandas column from string to datetime
Create a REST endpoint in Spring Boot that returns a list of users
How do I mock an HTTP call in Jest?
Write the bash to back up a MySQL database every night
What's wrong with using eval() in JavaScript?
Write a C macro that swaps two variables
How do I find memory leaks with valgrind?
Explain the CAP theorem with examples of databases
How do I write a binary file in Python?
Write a small interpreter for arithmetic expressions in OCaml
How do I send a Slack message from a Python script?
Write a PowerShell command to find files bigger than 1 GB
What is the difference between `#include <x>` and `#include "x"`?
Write a function that checks balanced parentheses
How can I make my website load faster? It's a React SPA with big bundles
How to use environment variables in a Vite project?
Explain the difference between SQL and NoSQL databases for a backend developer
Write a crontab line that runs a script every Monday at 9am
I need a regex to pull the numbers out of 'Order #1234 shipped'
write tests for a function that parses dates
Turn this Python dict into YAML
How do I make an enum in TypeScript?
Give me an nginx location block that serves /static from a folder
How do I fix 'fatal: not a git repository'?
Explain what `volatile` does in C
Write a Python class for a 2D vector with addition and dot product
What happens when I type a URL in the browser and press enter? (networking, DNS, HTTP)
How do I reverse a linked list recursively?
Write me a Discord bot in Python that replies 'pong' to '!ping'
How does garbage collection work in the JVM?
Write a matrix multiplication in NumPy without loops
What does 'async' mean in Rust and how do I use tokio?
Write a SwiftUI view with a list of items and a search bar
How do I read user input in C safely?
Set up TypeScript path aliases in a Next.js project
What does HTTP status 418 mean?
Write a function that converts snake_case to camelCase
How can I limit the memory of a docker container?
Explain the output of `top` on Linux
Write an Ansible task that creates a user with an SSH key
How do I write a Python context manager?
I accidentally committed a password to git, how do I remove it from history?
Write a GitHub Actions job that caches node_modules
Which is faster in Python: list comprehension or map?
"""

PROSE = """
What are some good strategies for paying off credit card debt?
Write a short story where the main character is a retired astronaut who opens a bakery
Tell me why the Byzantine Empire lasted so long
Can you help me write a eulogy for my aunt? She was a nurse and loved gardening.
How do I start a conversation with someone I like?
Write a letter to my younger self about courage
Give me an itinerary for a week in Iceland in winter
Explain the main causes of the 2008 financial crisis
What should I do if my toddler refuses to sleep?
Write an inspiring speech for a soccer team before the final
Explain the difference between empathy and sympathy with examples
Describe the perfect autumn day in a small town
Help me write a message to a friend I haven't talked to in years
What are the benefits of learning a musical instrument as an adult?
Write a scary story for a campfire
Explain how a bill becomes a law in the United States
Write a product announcement for our new meditation app
Plan a romantic weekend in Paris for our anniversary
What are the pros and cons of homeschooling?
Write a poem for my daughter's graduation
Write a short essay about why history matters
Why do cats purr? I want a detailed answer
Tell me about the life and work of Frida Kahlo
How do I politely tell my roommate to clean up more?
Write a motivational letter for a scholarship application
Describe how chocolate is made from cocoa beans
What can I do to feel less lonely after moving abroad?
Write a bedtime story about a sleepy bear who can't find his bed
Create a study plan for learning world history in three months
Explain the main ideas of Keynesian economics
Write a fun invitation for my son's dinosaur-themed birthday party
What are good ways to reduce food waste at home?
Tell me a story about a robot who wants to be a gardener
Write a description of a mysterious old house for my novel
Why is the Amazon rainforest important for the planet?
Write a short biography of Nikola Tesla for a school project
Help me write a resignation letter that keeps things friendly
What makes Shakespeare's plays still relevant today?
Write a dialogue between the sun and the moon
How can I build better habits? Give me a practical approach
Explain the Big Bang theory in simple terms
Write a LinkedIn summary for a project manager with 10 years of experience
Describe the experience of watching the northern lights
What are the causes and effects of deforestation?
I'm starting a podcast about local history. Write an intro for the first episode
Write a heartfelt apology to my partner for forgetting our anniversary
Explain how the European Union works
Give me a detailed packing list and tips for a camping trip with kids
Write an essay on the importance of voting
How can I improve my relationship with my teenage son?
Write a fable with a lesson about patience
What was daily life like in ancient Rome?
Write a newsletter paragraph announcing our new opening hours and thanking customers
Explain the benefits and risks of social media for democracy
Write a poem from the perspective of a river
What are some tips for a first-time manager?
Explain the theory of plate tectonics
Write a story about two siblings who discover a secret door in their attic
Describe the culture and traditions of the Day of the Dead
How do I write a good wedding vow?
Write a persuasive essay on why schools should start later
Explain why the Titanic sank and what changed afterwards
Write a gratitude journal entry for today
What should I know before adopting a rescue dog?
Write a short piece about the smell of old books
Outline a presentation about renewable energy for my class
How can I be a better listener?
Write a letter from a soldier in World War I to his family
Tell me about the history of the Olympic Games
What are the main differences between Buddhism and Hinduism?
Write a children's story that teaches kids to share
Give me advice on how to handle criticism at work
Write a welcome message for new members of our hiking club
Explain how hurricanes form and why they're getting stronger
Write a short story set in a world where nobody can lie
Describe Van Gogh's style and why it was revolutionary
"""

SHORT = """
how far is the moon from earth
What's the capital of New Zealand?
Who was the first woman to win a Nobel Prize?
What's 7 times 8?
How many weeks are in a year?
Translate "good luck" into Italian
What's the symbol for iron?
Is a bat a bird?
When was the Declaration of Independence signed?
What does 'RSVP' stand for?
How many grams in an ounce?
Who wrote The Odyssey?
what's 250 divided by 5
What is the largest desert in the world?
Which planet is known as the red planet?
hey!
thanks for the help
good afternoon
What's the opposite of 'ancient'?
How do you spell 'rhythm'?
What's the plural of 'mouse'?
Is 51 a prime number?
Who is the current secretary general of the UN?
What's the boiling point of water at sea level in Celsius?
How many players in a basketball team on court?
Which country gifted the Statue of Liberty to the US?
What's the tallest mountain in Africa?
How many seconds in an hour?
How do you say 'water' in Japanese?
What's 18% of 250?
What is the smallest country in the world?
Is Greenland part of Europe?
What's the capital of Canada?
Who invented the airplane?
what is 2 to the power of 8
What's the main language of Iran?
What does 'bon appétit' mean?
Which animal is the largest mammal?
How many stars are on the US flag?
Who played Jack in Titanic?
What year did the first World Cup take place?
What color is an emerald?
How many colours are in a rainbow?
Can snakes hear?
Is the Dead Sea really dead?
What's the chemical symbol for sodium?
Who was Napoleon's wife?
What's the currency of the UK?
How old is the Earth?
What's 3 cubed?
What's the freezing point of water in Fahrenheit?
Translate 'merci' to English
Define 'altruism' briefly
What's a word that rhymes with orange?
Who is the Roman god of war?
Does a tomato have seeds?
What's the speed limit on German autobahns?
How many hearts does an octopus have?
What's the capital of South Korea?
Which metal is liquid at room temperature?
How many legs does an insect have?
sup
thank you, that's all
have a nice day
good evening!
Who discovered electricity?
What's 99 + 1?
What does 'FAQ' stand for?
What is the national sport of Canada?
Are tomatoes vegetables?
When is Christmas?
What's the square root of 2?
How many calories in a banana?
What's the longest word in English?
Who sang 'Thriller'?
How many kilometers is a marathon?
Which continent is Egypt in?
What's the tallest tree species?
What's the capital city of Brazil?
Is it going to rain tomorrow in London?
Which year did Apple release the first Mac?
"""


def lines(block):
    return [x.strip() for x in block.strip().split("\n") if x.strip()]
