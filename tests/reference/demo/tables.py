"""Fixed tables for the demo corpus: countries, cities, tools, phrasings.

Everything here is data; corpus.py turns it into conversations. Pools marked
HELD_OUT are used only by the evaluation set, never by the training corpus, so
the evaluation measures generalisation to unseen cities, number pairs and
phrasings.
"""

# Countries and capitals. Every country appears in training (the model has to
# know the table); evaluation asks about them with held-out phrasings.
CAPITALS = [
    ("France", "Paris"), ("Germany", "Berlin"), ("Italy", "Rome"),
    ("Spain", "Madrid"), ("Portugal", "Lisbon"), ("the United Kingdom", "London"),
    ("Ireland", "Dublin"), ("the Netherlands", "Amsterdam"), ("Belgium", "Brussels"),
    ("Switzerland", "Bern"), ("Austria", "Vienna"), ("Poland", "Warsaw"),
    ("the Czech Republic", "Prague"), ("Hungary", "Budapest"), ("Greece", "Athens"),
    ("Sweden", "Stockholm"), ("Norway", "Oslo"), ("Denmark", "Copenhagen"),
    ("Finland", "Helsinki"), ("Iceland", "Reykjavik"), ("Russia", "Moscow"),
    ("Ukraine", "Kyiv"), ("Turkey", "Ankara"), ("Egypt", "Cairo"),
    ("Kenya", "Nairobi"), ("Nigeria", "Abuja"), ("Morocco", "Rabat"),
    ("Ethiopia", "Addis Ababa"), ("Ghana", "Accra"), ("Japan", "Tokyo"),
    ("China", "Beijing"), ("South Korea", "Seoul"), ("India", "New Delhi"),
    ("Pakistan", "Islamabad"), ("Bangladesh", "Dhaka"), ("Thailand", "Bangkok"),
    ("Vietnam", "Hanoi"), ("Indonesia", "Jakarta"), ("the Philippines", "Manila"),
    ("Malaysia", "Kuala Lumpur"), ("Australia", "Canberra"), ("New Zealand", "Wellington"),
    ("Canada", "Ottawa"), ("the United States", "Washington, D.C."), ("Mexico", "Mexico City"),
    ("Brazil", "Brasília"), ("Argentina", "Buenos Aires"), ("Chile", "Santiago"),
    ("Peru", "Lima"), ("Colombia", "Bogotá"), ("Venezuela", "Caracas"),
    ("Cuba", "Havana"), ("Saudi Arabia", "Riyadh"), ("Iran", "Tehran"),
    ("Iraq", "Baghdad"), ("Qatar", "Doha"), ("Nepal", "Kathmandu"),
    ("Mongolia", "Ulaanbaatar"), ("Romania", "Bucharest"), ("Croatia", "Zagreb"),
]

# Cities for weather requests in training (real names; pseudo-names are added by
# corpus.py so that the model learns to copy any name, not to recall a list).
TRAIN_CITIES = [
    "Paris", "London", "Berlin", "Madrid", "Rome", "Lisbon", "Dublin", "Amsterdam",
    "Brussels", "Vienna", "Prague", "Warsaw", "Budapest", "Athens", "Stockholm", "Oslo",
    "Copenhagen", "Helsinki", "Moscow", "Istanbul", "Cairo", "Nairobi", "Lagos", "Accra",
    "Casablanca", "Tokyo", "Kyoto", "Beijing", "Shanghai", "Seoul", "Busan", "Mumbai",
    "New Delhi", "Bangalore", "Karachi", "Dhaka", "Bangkok", "Hanoi", "Jakarta", "Manila",
    "Singapore", "Sydney", "Melbourne", "Auckland", "Toronto", "Vancouver", "Montreal",
    "New York", "Chicago", "Boston", "Seattle", "Denver", "Miami", "Houston", "Dallas",
    "Los Angeles", "San Francisco", "Mexico City", "Havana", "Lima", "Bogotá", "Santiago",
    "Buenos Aires", "Rio de Janeiro", "Sao Paulo", "Cape Town", "Johannesburg", "Dubai",
    "Doha", "Riyadh", "Tehran", "Kathmandu", "Zagreb", "Bucharest", "Sofia", "Belgrade",
    "Milan", "Naples", "Florence", "Venice", "Barcelona", "Bilbao", "Nice", "Bordeaux",
    "Toulouse", "Frankfurt", "Cologne", "Stuttgart", "Zurich", "Geneva", "Rotterdam",
    "Edinburgh", "Manchester", "Liverpool", "Cork", "Reykjavik", "Tallinn", "Riga",
    "Vilnius", "Kyiv", "Minsk", "Tbilisi", "Yerevan", "Baku", "Almaty", "Tashkent",
    "Ulaanbaatar", "Taipei", "Hong Kong", "Macau", "Kuala Lumpur", "Phnom Penh",
    "Colombo", "Lahore", "Perth", "Brisbane", "Adelaide", "Wellington", "Honolulu",
    "Anchorage", "Phoenix", "Atlanta", "Detroit", "Portland", "Quebec City", "Calgary",
    "Ottawa", "Monterrey", "Guadalajara", "Quito", "La Paz", "Montevideo", "Caracas",
    "Panama City", "San Juan", "Kingston", "Dakar", "Tunis", "Algiers", "Addis Ababa",
    "Kampala", "Kigali", "Lusaka", "Harare", "Luanda", "Abuja", "Rabat", "Marrakesh",
    "Salzburg", "Innsbruck", "Krakow", "Gdansk", "Brno", "Bratislava", "Ljubljana",
    "Split", "Dubrovnik", "Thessaloniki", "Izmir", "Antalya", "Beirut", "Amman", "Muscat",
]

# More real place names, used only as the source of the character model that
# invents city names in corpus.py (and never including a held-out city): the
# invented names then have the letter patterns of real ones (clusters, double
# letters, vowel starts), so copying them teaches copying of any real name.
NAME_SOURCE = [
    "Genoa", "Palermo", "Bologna", "Verona", "Trieste", "Bari", "Catania", "Pisa", "Siena", "Parma",
    "Lille", "Nantes", "Strasbourg", "Rennes", "Grenoble", "Dijon", "Avignon", "Montpellier", "Reims", "Brest",
    "Dresden", "Leipzig", "Bremen", "Hanover", "Nuremberg", "Dortmund", "Essen", "Mainz", "Kiel", "Rostock",
    "Utrecht", "Eindhoven", "Groningen", "Ghent", "Bruges", "Liege", "Namur", "Luxembourg", "Basel", "Lausanne",
    "Graz", "Linz", "Klagenfurt", "Ostrava", "Plzen", "Wroclaw", "Poznan", "Lodz", "Lublin", "Szczecin",
    "Debrecen", "Szeged", "Kosice", "Cluj", "Iasi", "Timisoara", "Varna", "Plovdiv", "Skopje", "Tirana",
    "Podgorica", "Sarajevo", "Mostar", "Novi Sad", "Nis", "Patras", "Heraklion", "Larnaca", "Valletta", "Tromso",
    "Trondheim", "Stavanger", "Aarhus", "Odense", "Aalborg", "Malmo", "Uppsala", "Umea", "Turku", "Tampere",
    "Oulu", "Tartu", "Kaunas", "Daugavpils", "Lviv", "Kharkiv", "Odesa", "Dnipro", "Chisinau", "Batumi",
    "Kutaisi", "Gyumri", "Ganja", "Astana", "Shymkent", "Bishkek", "Dushanbe", "Samarkand", "Bukhara", "Ashgabat",
    "Kabul", "Herat", "Peshawar", "Quetta", "Multan", "Faisalabad", "Kolkata", "Ahmedabad", "Surat", "Lucknow",
    "Kanpur", "Nagpur", "Indore", "Bhopal", "Patna", "Kochi", "Mysore", "Madurai", "Varanasi", "Amritsar",
    "Thimphu", "Pokhara", "Chittagong", "Sylhet", "Yangon", "Mandalay", "Vientiane", "Luang Prabang", "Hue",
    "Haiphong", "Penang", "Ipoh", "Surabaya", "Bandung", "Medan", "Makassar", "Davao", "Iloilo", "Kaohsiung",
    "Taichung", "Guangzhou", "Shenzhen", "Chengdu", "Wuhan", "Xian", "Nanjing", "Hangzhou", "Tianjin", "Harbin",
    "Qingdao", "Kunming", "Lhasa", "Urumqi", "Fukuoka", "Sendai", "Kobe", "Hiroshima", "Yokohama", "Nagasaki",
    "Daegu", "Gwangju", "Ulsan", "Jeonju", "Cairns", "Geelong", "Newcastle", "Canberra", "Townsville",
    "Christchurch", "Dunedin", "Queenstown", "Rotorua", "Suva", "Noumea", "Edmonton", "Regina", "Saskatoon",
    "Victoria", "Moncton", "Fredericton", "Charlottetown", "Yellowknife", "Whitehorse", "Boise", "Spokane",
    "Tucson", "Albuquerque", "El Paso", "San Antonio", "New Orleans", "Memphis", "Louisville", "Baltimore",
    "Pittsburgh", "Cleveland", "Cincinnati", "Minneapolis", "Omaha", "Tulsa", "Wichita", "Raleigh", "Richmond",
    "Savannah", "Charleston", "Sacramento", "Fresno", "Reno", "Salt Lake City", "Billings", "Fargo", "Duluth",
    "Tijuana", "Cancun", "Oaxaca", "Puebla", "Merida", "Leon", "Guatemala City", "San Salvador", "Managua",
    "Tegucigalpa", "San Jose", "Guayaquil", "Cuenca", "Arequipa", "Trujillo", "Sucre", "Cochabamba", "Asuncion",
    "Rosario", "Mendoza", "Ushuaia", "Valparaiso", "Concepcion", "Recife", "Salvador", "Fortaleza", "Manaus",
    "Belem", "Curitiba", "Natal", "Cartagena", "Barranquilla", "Cali", "Maracaibo", "Paramaribo",
    "Georgetown", "Port of Spain", "Santo Domingo", "Nassau", "Bridgetown", "Tripoli", "Benghazi", "Fez",
    "Tangier", "Agadir", "Oran", "Sfax", "Bamako", "Niamey", "Ouagadougou", "Abidjan", "Kumasi", "Tamale",
    "Kano", "Ibadan", "Enugu", "Douala", "Yaounde", "Libreville", "Kinshasa", "Lubumbashi", "Brazzaville",
    "Ndola", "Bulawayo", "Maputo", "Beira", "Lilongwe", "Blantyre", "Dodoma", "Arusha", "Zanzibar", "Kisumu",
    "Gulu", "Bujumbura", "Khartoum", "Juba", "Mogadishu", "Hargeisa", "Djibouti", "Asmara", "Windhoek",
    "Gaborone", "Maseru", "Mbabane", "Pretoria", "Bloemfontein", "Port Elizabeth", "Antananarivo", "Port Louis",
    "Jeddah", "Mecca", "Medina", "Dammam", "Abu Dhabi", "Sharjah", "Manama", "Kuwait City", "Basra", "Mosul",
    "Erbil", "Isfahan", "Shiraz", "Tabriz", "Mashhad", "Damascus", "Aleppo", "Haifa", "Jerusalem", "Aqaba",
    "Ankara", "Bursa", "Konya", "Trabzon", "Nicosia", "Aberdeen", "Inverness", "Dundee", "Belfast", "Galway",
    "Limerick", "Cardiff", "Swansea", "Bristol", "Oxford", "Cambridge", "York", "Nottingham", "Leicester",
    "Sheffield", "Brighton", "Plymouth", "Norwich", "Exeter", "Bath", "Coventry", "Wolverhampton",
]

# Real cities used only by the evaluation (never in training text).
HELD_OUT_CITIES = [
    "Osaka", "Marseille", "Hamburg", "Valencia", "Porto", "Glasgow", "Antwerp",
    "Gothenburg", "Bergen", "Seville", "Lyon", "Munich", "Turin", "Leeds", "Nagoya",
    "Chennai", "Hyderabad", "Jaipur", "Pune", "Cebu", "Hobart", "Darwin", "Winnipeg",
    "Halifax", "Austin", "Nashville", "San Diego", "Las Vegas", "Tampa", "Orlando",
    "Medellin", "Cusco", "Cordoba", "Mombasa", "Durban", "Alexandria", "Sapporo",
    "Incheon", "Da Nang", "Chiang Mai",
]

# Syllables for pseudo-city names (training only): teach copying of arbitrary names.
CITY_SYLLABLES = [
    "ka", "lo", "mar", "ven", "tor", "ri", "sa", "bel", "do", "nu", "ther", "ash",
    "mi", "ra", "po", "len", "gar", "zu", "fen", "ko", "ta", "vi", "dra", "lin",
    "mon", "ser", "al", "ba", "cor", "del", "es", "har", "jo", "qu", "ul", "yo",
]
CITY_SUFFIXES = ["ville", "burg", "stad", "port", "ton", "ham", "field", "dale", "mont", "ia", "ora", "grad"]
CITY_PATTERNS = ["{x}", "{x}", "{x}", "{x}", "New {x}", "Port {x}", "San {x}", "{x} Springs", "Lake {x}", "{x} Bay"]

CONDITIONS = [
    "sunny", "cloudy", "rainy", "windy", "snowy", "foggy", "partly cloudy", "clear",
    "stormy", "overcast", "drizzly", "humid",
]

# Words for write_file contents and file names.
CONTENT_WORDS = [
    "buy", "milk", "eggs", "bread", "call", "mom", "meeting", "at", "noon", "project",
    "notes", "ideas", "for", "the", "weekend", "remember", "to", "water", "plants",
    "pay", "rent", "book", "flight", "review", "draft", "send", "report", "clean",
    "kitchen", "walk", "dog", "finish", "homework", "pick", "up", "kids", "train",
    "leaves", "early", "hello", "world", "shopping", "list", "apples", "coffee", "tea",
    "birthday", "party", "on", "friday", "gym", "class", "lunch", "with", "sam",
    "fix", "bike", "read", "chapter", "three", "todo", "garden", "paint", "fence",
]
# Common English words: only the source of the character model that invents
# training words for file names and contents (corpus.py), so that the model
# copies any word it is given; never a held-out word or stem.
WORD_SOURCE = [
    "about", "after", "again", "air", "also", "animal", "answer", "apple", "area", "around", "away", "baby",
    "back", "ball", "bank", "basket", "beach", "bear", "bed", "before", "begin", "bell", "better", "bird",
    "black", "board", "boat", "body", "bottle", "box", "brother", "brown", "build", "bus", "butter", "cake",
    "camera", "candle", "car", "card", "care", "carry", "castle", "cat", "chair", "change", "cheese", "child",
    "city", "clock", "cloud", "coat", "cold", "color", "corner", "cotton", "country", "cousin", "cream", "cup",
    "dance", "dark", "daughter", "desk", "dinner", "door", "dream", "dress", "drink", "drive", "earth", "east",
    "engine", "evening", "face", "family", "farm", "father", "field", "film", "finger", "fire", "fish", "floor",
    "flower", "forest", "fork", "friend", "fruit", "game", "gate", "glass", "gold", "grass", "green", "ground",
    "group", "hair", "hand", "hat", "heart", "hill", "horse", "hospital", "hotel", "house", "island", "jacket",
    "jam", "key", "king", "knife", "lake", "lamp", "letterbox", "light", "lemon", "market", "match", "metal",
    "minute", "money", "month", "morning", "mother", "mountain", "music", "nature", "needle", "north", "number",
    "ocean", "office", "paper", "parent", "pencil", "pepper", "photo", "picture", "pillow", "planet", "pocket",
    "potato", "queen", "rabbit", "rain", "river", "road", "rock", "room", "salt", "school", "sea", "season",
    "shirt", "shoe", "silver", "sister", "sky", "snow", "soap", "song", "soup", "south", "spoon", "spring",
    "star", "station", "stone", "street", "sugar", "summer", "table", "teacher", "tiger", "time", "tomato",
    "tooth", "town", "tree", "truck", "uncle", "valley", "village", "voice", "wall", "watch", "west", "wind",
    "window", "winter", "wood", "yellow", "zebra", "zero", "velvet", "quartz", "jungle", "oxygen", "whisper",
]
HELD_OUT_CONTENT_WORDS = [
    "orange", "juice", "dentist", "tuesday", "concert", "tickets", "laundry", "yoga",
    "guitar", "lesson", "pizza", "night", "library", "return", "package", "blue",
]
FILE_STEMS = [
    "notes", "todo", "list", "shopping", "ideas", "plan", "journal", "draft", "memo",
    "reminders", "tasks", "log", "summary", "agenda", "diary", "recipe", "report",
]
HELD_OUT_FILE_STEMS = ["errands", "packing", "goals", "budget", "poem", "letter"]
FILE_DIRS = ["", "", "", "docs/", "notes/", "tmp/", "work/", "home/", "data/"]
FILE_EXTS = [".txt", ".txt", ".txt", ".md", ".log", ".csv"]

# Tool schemas (JSON schema, the OpenAI/Hugging Face "function" form). A few
# description variants so that the model keys on names, not exact wording.
WEATHER_DESCRIPTIONS = [
    "Get the current weather for a city.",
    "Get the current weather in a given city.",
    "Look up current weather conditions for a location.",
]
CALC_DESCRIPTIONS = [
    "Evaluate an arithmetic expression and return the result.",
    "Calculate the value of a math expression.",
    "A calculator for arithmetic expressions.",
]
WRITE_DESCRIPTIONS = [
    "Write text content to a file at the given path.",
    "Save content to a file.",
    "Create or overwrite a file with the given content.",
]


def weather_tool(variant):
    """get_weather(city, unit?) schema; variant picks the description wording."""
    props = {
        "city": {"type": "string", "description": ["The city name", "City to look up", "Name of the city"][variant % 3]},
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"], "description": "Temperature unit"},
    }
    return {"type": "function", "function": {
        "name": "get_weather", "description": WEATHER_DESCRIPTIONS[variant % 3],
        "parameters": {"type": "object", "properties": props, "required": ["city"]}}}


def calculator_tool(variant):
    """calculator(expression) schema."""
    props = {"expression": {"type": "string", "description": ["The expression to evaluate, e.g. 2 * (3 + 4)",
                                                             "Arithmetic expression",
                                                             "Math expression to calculate"][variant % 3]}}
    return {"type": "function", "function": {
        "name": "calculator", "description": CALC_DESCRIPTIONS[variant % 3],
        "parameters": {"type": "object", "properties": props, "required": ["expression"]}}}


def write_file_tool(variant):
    """write_file(path, content) schema."""
    props = {
        "path": {"type": "string", "description": ["Path of the file", "File path", "Where to write the file"][variant % 3]},
        "content": {"type": "string", "description": ["Text to write", "The content of the file", "File contents"][variant % 3]},
    }
    return {"type": "function", "function": {
        "name": "write_file", "description": WRITE_DESCRIPTIONS[variant % 3],
        "parameters": {"type": "object", "properties": props, "required": ["path", "content"]}}}


# Distractor tools that never fit any request in the corpus: they make the
# model check which tools are offered by name rather than by position or count.
DISTRACTOR_TOOLS = [
    {"type": "function", "function": {
        "name": "get_stock_price", "description": "Get the latest stock price for a ticker symbol.",
        "parameters": {"type": "object", "properties": {"symbol": {"type": "string", "description": "Ticker symbol"}},
                       "required": ["symbol"]}}},
    {"type": "function", "function": {
        "name": "set_timer", "description": "Start a countdown timer.",
        "parameters": {"type": "object", "properties": {"minutes": {"type": "integer", "description": "Length in minutes"}},
                       "required": ["minutes"]}}},
    {"type": "function", "function": {
        "name": "play_music", "description": "Play a song by name.",
        "parameters": {"type": "object", "properties": {"song": {"type": "string", "description": "Song title"}},
                       "required": ["song"]}}},
]

SYSTEM_PROMPTS = [
    "You are a helpful assistant.",
    "You are a friendly and concise assistant.",
    "You are Infernix Demo, a tiny assistant model.",
    "You are a helpful assistant. Answer briefly.",
]

# Phrasings. Each list is (train, held_out): held-out phrasings are only used
# by the evaluation set.
WEATHER_Q = ([
    "What's the weather in {city}?", "What is the weather like in {city}?",
    "How's the weather in {city} today?", "Is it raining in {city}?",
    "Tell me the weather in {city}.", "Weather in {city}?", "What's it like outside in {city}?",
    "Can you check the weather in {city}?", "How hot is it in {city} right now?",
    "I'm heading to {city}. What's the weather there?", "Do I need an umbrella in {city} today?",
    "What's the current temperature in {city}?", "Check the weather for {city}, please.",
    "Give me the weather report for {city}.", "Is it cold in {city}?",
], [
    "How is the weather looking in {city}?", "What are the weather conditions in {city}?",
    "Could you look up the weather for {city}?", "Is it sunny in {city} right now?",
])
UNIT_SUFFIX = {"celsius": [" in Celsius", " in celsius", " (in Celsius)"],
               "fahrenheit": [" in Fahrenheit", " in fahrenheit", " (in Fahrenheit)"]}

CALC_Q = ([
    "What is {e}?", "Calculate {e}.", "Compute {e} for me.", "Can you work out {e}?",
    "How much is {e}?", "Please evaluate {e}.", "What does {e} come to?", "Solve {e}.",
    "Use the calculator to find {e}.", "I need the result of {e}.",
], [
    "Could you calculate {e} for me?", "What's the value of {e}?",
])

WRITE_Q = ([
    "Save the text \"{c}\" to {p}.", "Write \"{c}\" to the file {p}.",
    "Create a file called {p} containing \"{c}\".", "Please put \"{c}\" into {p}.",
    "Write a file {p} with the content \"{c}\".", "Store \"{c}\" in {p}.",
    "Can you save \"{c}\" to {p} for me?", "Make a file named {p} that says \"{c}\".",
], [
    "Could you write \"{c}\" into a file named {p}?", "Please save \"{c}\" as {p}.",
])

CAPITAL_Q = ([
    "What is the capital of {c}?", "What's the capital of {c}?", "Which city is the capital of {c}?",
    "Name the capital of {c}.", "Tell me the capital of {c}.", "Capital of {c}?",
    "Do you know the capital of {c}?", "What is the capital city of {c}?",
    "Which city is {c}'s capital?", "I'm curious, what is the capital of {c}?",
    "What city is the capital of {c}?", "{c}: what is its capital?",
    "Can you tell me the capital of {c}?", "Where is the capital of {c}?",
    "What's {c}'s capital city?", "The capital of {c} is which city?",
    "Please name the capital city of {c}.", "Which city serves as {c}'s capital?",
    "What is the name of the capital of {c}?", "capital of {c}",
], [
    "Could you tell me what the capital of {c} is?", "What city is {c}'s capital?",
    "Which city is the capital city of {c}?", "Remind me, what's the capital of {c}?",
])

ADD_Q = ([
    "What is {a} + {b}?", "What's {a} plus {b}?", "Add {a} and {b}.", "Compute {a} + {b}.",
    "How much is {a} + {b}?", "{a} + {b} = ?", "What is the sum of {a} and {b}?",
    "Calculate {a} plus {b}.", "{a} + {b}", "Please add {a} and {b}.", "What do {a} and {b} add up to?",
], [
    "What do you get when you add {a} and {b}?", "Can you add {a} and {b} for me?",
])
SUB_Q = ([
    "What is {a} - {b}?", "What's {a} minus {b}?", "Compute {a} - {b}.", "How much is {a} - {b}?",
    "{a} - {b} = ?", "Subtract {b} from {a}.", "Calculate {a} minus {b}.", "{a} - {b}",
    "What is {a} take away {b}?",
], [
    "What do you get when you subtract {b} from {a}?",
])

CONVERSIONS = [
    # (from, to, factor or None for temperature, question templates)
    ("km", "miles", 0.621371, ["How many miles is {x} km?", "Convert {x} km to miles.", "What is {x} kilometers in miles?"]),
    ("miles", "km", 1.609344, ["How many kilometers is {x} miles?", "Convert {x} miles to km.", "What is {x} miles in kilometers?"]),
    ("kg", "lb", 2.204623, ["How many pounds is {x} kg?", "Convert {x} kg to pounds.", "What is {x} kilograms in pounds?"]),
    ("lb", "kg", 0.453592, ["How many kilograms is {x} pounds?", "Convert {x} lb to kg.", "What is {x} pounds in kilograms?"]),
    ("°C", "°F", None, ["What is {x}°C in Fahrenheit?", "Convert {x}°C to Fahrenheit.", "{x} degrees Celsius in Fahrenheit?"]),
    ("°F", "°C", None, ["What is {x}°F in Celsius?", "Convert {x}°F to Celsius.", "{x} degrees Fahrenheit in Celsius?"]),
]

GREETINGS = [
    (["Hi", "Hello", "Hey", "Hi!", "Hello!", "Hey there!", "Hi there", "Good morning!", "Good evening!",
      "Good afternoon", "Hiya", "Greetings!", "Yo", "Hello there, how are you?"],
     ["Hello! How can I help you today?", "Hi there! What can I do for you?",
      "Hey! How can I help?", "Hello! What would you like to know?"],
     "The user is greeting me, so I will greet them back and offer help."),
    (["How are you?", "How are you doing?", "How's it going?", "How are you today?", "What's up?"],
     ["I'm doing well, thank you! How can I help you today?", "All good here, thanks for asking! What can I do for you?"],
     "The user asks how I am. I will answer kindly and offer help."),
    (["What's your name?", "Who are you?", "What are you?", "Introduce yourself.", "What should I call you?"],
     ["I'm Infernix Demo, a tiny assistant model. I can chat, do simple arithmetic, name capitals, convert units, and call tools like get_weather, calculator and write_file.",
      "I'm a small demo assistant called Infernix Demo. I can do simple math, name capitals, convert units and use tools."],
     "The user asks who I am. I will introduce myself briefly."),
    (["What can you do?", "How can you help me?", "What are you good at?", "Help", "What do you know?"],
     ["I can chat, add and subtract numbers, name the capitals of many countries, convert units, and use tools such as get_weather, calculator and write_file when they are available.",
      "I can help with greetings, simple arithmetic, capital cities, unit conversions, and tool calls for weather, calculations and files."],
     "The user asks what I can do. I will list my skills."),
    (["Thanks!", "Thank you", "Thanks a lot", "Thank you very much!", "Great, thanks", "Cheers", "Perfect, thank you!"],
     ["You're welcome!", "You're welcome! Anything else?", "Glad I could help!", "Happy to help!"],
     "The user thanks me. I will reply politely."),
    (["Bye", "Goodbye!", "See you later", "Good night!", "That's all, bye!"],
     ["Goodbye! Have a great day!", "Bye! Take care.", "See you later!"],
     "The user is saying goodbye. I will say goodbye too."),
    (["Tell me a joke", "Do you know any jokes?", "Make me laugh", "Tell me something funny"],
     ["Why did the math book look sad? Because it had too many problems.",
      "Why don't scientists trust atoms? Because they make up everything.",
      "I told my computer a joke about UDP, but I'm not sure it got it."],
     "The user wants a joke. I will tell a short, friendly one."),
    (["I'm bored", "I feel tired today", "I had a long day", "I'm happy today!"],
     ["I'm sorry to hear that. Maybe a short break would help. Is there anything I can do for you?",
      "Thanks for sharing! Is there something I can help you with?"],
     "The user shares how they feel. I will respond kindly."),
]

# Out-of-scope requests: the model says politely that it is too small to help.
OUT_OF_SCOPE_TOPICS = [
    "quantum physics", "the stock market", "the history of Rome", "how to bake bread",
    "machine learning", "the rules of chess", "black holes", "the French revolution",
    "how vaccines work", "the meaning of life", "climate change", "poetry", "car engines",
    "the best football team", "how to learn Spanish", "philosophy", "the moon landing",
]
OUT_OF_SCOPE_Q = [
    "Can you explain {t}?", "Tell me about {t}.", "Write an essay on {t}.", "What do you think about {t}?",
    "Teach me {t}.", "I want to learn about {t}.",
]
