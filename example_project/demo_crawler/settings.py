"""Settings of the demo project: one line enables scrapy-simhash."""

BOT_NAME = "demo_crawler"
SPIDER_MODULES = ["demo_crawler.spiders"]
NEWSPIDER_MODULE = "demo_crawler.spiders"

ADDONS = {"scrapy_simhash.Addon": 500}

# The demo site is local; be quick, and polite anyway.
ROBOTSTXT_OBEY = False
CONCURRENT_REQUESTS = 8
DOWNLOAD_DELAY = 0
TELNETCONSOLE_ENABLED = False
LOG_LEVEL = "INFO"
FEED_EXPORT_ENCODING = "utf-8"
